package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// benchCommand matches a `go test ... -bench X` line of the docs: its packages and its
// -bench pattern.
var benchCommand = regexp.MustCompile(`^go test (.*?)-bench '?([^' ]+)'?`)

// TestDocBenchmarksExist: every `go test -bench` command that the docs quote names at
// least one benchmark in every package it lists, so that no quoted command silently runs
// nothing after a benchmark moves.
func TestDocBenchmarksExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the test binaries of the packages the docs name")
	}
	files, err := docFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range docBenchCommands(string(text)) {
			for _, pkg := range cmd.packages {
				out, err := exec.Command("go", "test", "-list", cmd.pattern, pkg).CombinedOutput()
				if err != nil {
					t.Errorf("%s: go test -list %s %s: %v\n%s", f, cmd.pattern, pkg, err, out)
					continue
				}
				if !strings.Contains(string(out), "Benchmark") {
					t.Errorf("%s: `-bench %s` names no benchmark in %s", f, cmd.pattern, pkg)
				}
			}
		}
	}
}

// docBench is one quoted benchmark command.
type docBench struct {
	packages []string
	pattern  string
}

// docBenchCommands finds the `go test -bench` commands of a Markdown text.
func docBenchCommands(text string) []docBench {
	var cmds []docBench
	for _, line := range strings.Split(text, "\n") {
		m := benchCommand.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var pkgs []string
		for _, field := range strings.Fields(line) {
			if field == "." || strings.HasPrefix(field, "./") {
				pkgs = append(pkgs, field)
			}
		}
		// -list matches top-level names only: a sub-benchmark's pattern is cut at its /.
		pattern, _, _ := strings.Cut(m[2], "/")
		cmds = append(cmds, docBench{packages: pkgs, pattern: pattern})
	}
	return cmds
}

// TestDocBenchCommandsParse: the parser finds the packages and the pattern of a quoted
// command, the pattern cut at a sub-benchmark.
func TestDocBenchCommandsParse(t *testing.T) {
	got := docBenchCommands("text\ngo test ./dist/tcp ./dist/shm -run XXX -bench 'AllReduce$|Shm' -count 5   # note\n" +
		"go test -run '^$' -bench Simulator -benchtime 1x .\ngo test ./nets -run XXX -bench 'TrainStep/(vgg16)' -benchtime 3x\n")
	if len(got) != 3 {
		t.Fatalf("found %d commands, want 3: %+v", len(got), got)
	}
	if strings.Join(got[0].packages, " ") != "./dist/tcp ./dist/shm" || got[0].pattern != "AllReduce$|Shm" {
		t.Errorf("first command: %+v", got[0])
	}
	if strings.Join(got[1].packages, " ") != "." || got[1].pattern != "Simulator" {
		t.Errorf("second command: %+v", got[1])
	}
	if got[2].pattern != "TrainStep" {
		t.Errorf("third command: pattern %q, want TrainStep", got[2].pattern)
	}
}

// TestDocReliabilityTableMatchesTheCampaign: the campaign's table in docs/reliability.md
// is the one its committed output ends with, row for row.
func TestDocReliabilityTableMatchesTheCampaign(t *testing.T) {
	doc, err := os.ReadFile("docs/reliability.md")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile("docs/chaos-campaign.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		in = strings.HasPrefix(line, "| fault | trials") || in && strings.HasPrefix(line, "|")
		if !in {
			continue
		}
		rows++
		if !strings.Contains(string(log), line+"\n") {
			t.Errorf("docs/reliability.md has %q, which docs/chaos-campaign.txt does not", line)
		}
	}
	if rows < 3 {
		t.Errorf("docs/reliability.md quotes %d rows of the campaign's table, want it whole", rows)
	}
}

// outputMarker precedes a fenced block in the docs that quotes a command's output kept
// under docs/runs (<!-- output: runs/FILE -->) or a report kept under results
// (<!-- output: ../results/DIR/report.md -->), the path relative to docs/.
var outputMarker = regexp.MustCompile(`^<!-- output: ((?:runs|\.\./results)/[A-Za-z0-9._/-]+) -->$`)

// TestDocOutputBlocksMatchTheirRuns: every fenced block the docs mark as a command's output
// quotes that output line for line: each of its lines is a whole line of the kept file.
func TestDocOutputBlocksMatchTheirRuns(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range markedBlocks(string(raw)) {
			blocks++
			kept, err := os.ReadFile(filepath.Join("docs", b.file))
			if err != nil {
				t.Errorf("%s: %v", doc, err)
				continue
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(string(kept), "\n") {
				lines[strings.TrimRight(l, " ")] = true
			}
			for _, l := range b.lines {
				if l = strings.TrimRight(l, " "); l != "" && !lines[l] {
					t.Errorf("%s quotes %q, which %s does not have", doc, l, filepath.Join("docs", b.file))
				}
			}
		}
	}
	if blocks == 0 {
		t.Error("no marked output block in docs/*.md")
	}
}

// markedBlock is a fenced block after an output marker: the file it quotes and its lines.
type markedBlock struct {
	file  string
	lines []string
}

// markedBlocks finds the fenced blocks of a markdown text that directly follow an output
// marker line.
func markedBlocks(md string) []markedBlock {
	var out []markedBlock
	lines := strings.Split(md, "\n")
	for i := 0; i+1 < len(lines); i++ {
		m := outputMarker.FindStringSubmatch(lines[i])
		if m == nil || !strings.HasPrefix(lines[i+1], "```") {
			continue
		}
		b := markedBlock{file: m[1]}
		for j := i + 2; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			b.lines = append(b.lines, lines[j])
		}
		out = append(out, b)
	}
	return out
}

func TestMarkedBlocks(t *testing.T) {
	md := "intro\n<!-- output: runs/a.txt -->\n```text\nx 1\n\ny 2\n```\n```\nnot marked\n```\n<!-- output: runs/b.txt -->\nno block\n"
	got := markedBlocks(md)
	if len(got) != 1 || got[0].file != "runs/a.txt" || strings.Join(got[0].lines, "|") != "x 1||y 2" {
		t.Errorf("markedBlocks = %+v", got)
	}
}
