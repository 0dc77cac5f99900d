package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/ssfusion/ssfusion/internal/figures"
	"github.com/ssfusion/ssfusion/sim"
)

// readmeMaxLines is the most lines README.md may have: it says what the project is and how
// to start, and the topic pages under docs/ hold the rest.
const readmeMaxLines = 220

// TestDocLinks checks every relative link and image in README.md and docs/*.md: the file
// or folder it names must exist, and an anchor into a Markdown file must name one of that
// file's headings.
func TestDocLinks(t *testing.T) {
	files, err := docFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, problem := range checkDocLinks(files) {
		t.Error(problem)
	}
}

// TestDocReadmeLength holds README.md to readmeMaxLines.
func TestDocReadmeLength(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := countLines(string(b)); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move detail into a page under docs/", n, readmeMaxLines)
	}
}

// TestDocLinkCheckerCatchesBrokenLinks: the check names a missing file, a missing anchor
// in another file and in the same file, and accepts what exists.
func TestDocLinkCheckerCatchesBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("docs/other.md", "# Other page\n\n## The `train` command, again\n\n## Twice\n\n## Twice\n")
	write("docs/plot.png", "png")
	readme := write("README.md", strings.Join([]string{
		"# Title",
		"",
		"## Good links",
		"[page](docs/other.md) [anchor](docs/other.md#the-train-command-again) [dup](docs/other.md#twice-1)",
		"![plot](docs/plot.png) [self](#good-links) [web](https://example.com/missing.md) [folder](docs/)",
		"[ref]: docs/other.md#twice",
		"`[not a link](missing-in-code.md)`",
		"```",
		"[not a link either](missing-in-fence.md)",
		"```",
		"",
		"## Bad links",
		"[gone](docs/gone.md) ![gone image](docs/gone.png) [bad anchor](docs/other.md#nowhere)",
		"[bad self](#nowhere-here) [bad ref]: docs/gone-ref.md",
		"[bad ref def]: docs/gone-ref.md",
	}, "\n"))
	got := checkDocLinks([]string{readme})
	want := []string{"docs/gone.md", "docs/gone.png", "docs/other.md#nowhere", "#nowhere-here", "docs/gone-ref.md"}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d, one for each of %q", strings.Join(got, "\n"), len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) || !strings.Contains(got[i], "README.md") {
			t.Errorf("problem %q, want one naming README.md and %s", got[i], w)
		}
	}
}

// TestDocSlugs follows GitHub's anchors for headings.
func TestDocSlugs(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start (a fresh machine with Go 1.26; nothing else)", "quick-start-a-fresh-machine-with-go-126-nothing-else"},
		{"Checkpoints (`--checkpoint-every`, `--resume`)", "checkpoints---checkpoint-every---resume"},
		{"What a run writes (`--out`)", "what-a-run-writes---out"},
		{"**Bold** and [a link](x.md)", "bold-and-a-link"},
		{"snake_case stays", "snake_case-stays"},
		{"Top-k selection (`compress`)", "top-k-selection-compress"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// docFiles lists README.md and every docs/*.md under root.
func docFiles(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...), nil
}

// checkDocLinks returns one problem per relative link or image of files whose target does
// not exist, in file order and, within a file, in the order of the links.
func checkDocLinks(files []string) []string {
	var problems []string
	anchors := map[string]map[string]bool{} // by cleaned path of a Markdown file
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path], nil
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, l := range markdownLinks(string(b)) {
			target, err := url.PathUnescape(l.target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", file, l.line, l.target, err))
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			resolved := filepath.Clean(file)
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(resolved); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s does not exist", file, l.line, l.target, resolved))
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			a, err := anchorsOf(resolved)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", file, l.line, l.target, err))
				continue
			}
			if !a[fragment] {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s has no heading with anchor #%s", file, l.line, l.target, resolved, fragment))
			}
		}
	}
	return problems
}

// A link is the destination of a Markdown link, image or link reference definition.
type link struct {
	target string
	line   int
}

var (
	// inlineLink matches the "](destination" of an inline link or image, with the
	// destination bare or in angle brackets; nested links and images each match.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)`)
	// refDefinition matches a link reference definition, "[label]: destination".
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// external is a destination with a scheme (https:, mailto:) or a host (//host).
	external = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*:|//)`)
)

// markdownLinks returns the relative destinations of text's links and images, outside
// fenced code blocks and code spans.
func markdownLinks(text string) []link {
	var links []link
	add := func(dest string, line int) {
		dest = strings.TrimSuffix(strings.TrimPrefix(dest, "<"), ">")
		if dest != "" && !external.MatchString(dest) {
			links = append(links, link{dest, line})
		}
	}
	for i, line := range unfencedLines(text) {
		line = stripCodeSpans(line)
		if line == "" {
			continue
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			add(m[1], i+1)
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			add(m[1], i+1)
		}
	}
	return links
}

// headingAnchors returns the anchors GitHub gives text's headings: each heading's slug,
// with -1, -2, ... added to repeats, and the ids and names of HTML anchors.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	htmlAnchor := regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	for _, line := range unfencedLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		heading, ok := atxHeading(line)
		if !ok {
			continue
		}
		s := slug(heading)
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// atxHeading returns the text of an ATX heading line ("## Text ##").
func atxHeading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", false
	}
	level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
	if level < 1 || level > 6 {
		return "", false
	}
	rest := trimmed[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if closing := strings.TrimRight(rest, "#"); closing == "" || strings.HasSuffix(closing, " ") {
		rest = strings.TrimSpace(closing)
	}
	return rest, true
}

var (
	inlineLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag        = regexp.MustCompile(`<[^>]+>`)
)

// slug is GitHub's anchor for a heading: the text as rendered (links reduced to their
// text, markup and HTML tags dropped), lower case, with every character other than a
// letter, a digit, a space, a hyphen or an underscore removed and the spaces made hyphens.
func slug(heading string) string {
	heading = inlineLinkText.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unfencedLines returns text's lines with the lines of fenced code blocks emptied, so that
// what looks like a link or a heading in code is not taken for one. The line numbers stay.
func unfencedLines(text string) []string {
	var lines []string
	var fence string // the opening fence while inside a fenced block
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if fence != "" {
			if indent <= 3 && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
				fence = ""
			}
			lines = append(lines, "")
			continue
		}
		if indent <= 3 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			c := trimmed[:1]
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, c))]
			lines = append(lines, "")
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// stripCodeSpans removes the code spans of one line: a run of backticks up to the next run
// of the same length. An unmatched run is kept as it is.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		run := line[i : i+n]
		end := -1
		for j := i + n; j < len(line); {
			k := strings.Index(line[j:], run)
			if k < 0 {
				break
			}
			k += j
			m := len(line[k:]) - len(strings.TrimLeft(line[k:], "`"))
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 {
			b.WriteString(line[:i+n])
			line = line[i+n:]
			continue
		}
		b.WriteString(line[:i])
		line = line[end+n:]
	}
}

// countLines counts lines as wc -l does, plus a last line without a newline.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// TestDocNamedSettingsMatchTheCode: the table of named settings in docs/simulator.md
// gives each setting the workers, link and start-up that the maps simulate it at.
func TestDocNamedSettingsMatchTheCode(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("docs", "simulator.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sim.NamedSettings() {
		c := n.Constants
		want := fmt.Sprintf("| %s | %d | %s | %s |", n.Name, c.Workers, sim.FormatBandwidth(c.BitsPerSecond), sim.FormatDuration(c.Latency))
		if !strings.Contains(string(data), want) {
			t.Errorf("docs/simulator.md has no row starting %q", want)
		}
	}
}

// TestQuotedFiguresMatchTheirSources: every figure that README.md, results/README.md and
// docs/*.md quote from a result file, marked with the expression that computes it, is what
// the committed file gives (`go run . figures` rewrites them).
func TestQuotedFiguresMatchTheirSources(t *testing.T) {
	files, err := quotingFiles()
	if err != nil {
		t.Fatal(err)
	}
	src := figures.NewSources(".")
	for _, f := range files {
		stale, err := src.Check(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, fig := range stale {
			t.Errorf("%v (go run . figures rewrites it)", fig)
		}
	}
}
