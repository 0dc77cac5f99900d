// Command reproduce regenerates the whole reproduction under results/ at one source
// revision: it checks that revision out in a checkout of its own, builds the program there
// once, and runs every experiment, simulation and map from that checkout with that binary,
// its results written into this checkout's results/. Every summary, simulation and map
// point then records the same revision, and the experiment files and scripts are that
// revision's too, whatever is committed meanwhile (results, documentation).
//
//	go run ./tools/reproduce            # go on with the reproduction under way, or start one at HEAD
//	go run ./tools/reproduce -list      # the steps, their estimated cost and state
//	go run ./tools/reproduce -only headline,exdyna
//	go run ./tools/reproduce -restart   # a new reproduction at HEAD
//
// It is resumable: results/reproduce.json records the revision and each step's state, a
// step finished at that revision is skipped, and one interrupted goes on where its own
// command stopped (every run and map resumes). A step whose folder holds results of
// another revision starts afresh: the old folder is moved to results/.previous/ (which git
// ignores) rather than deleted. Before each step it prints the step, the time spent and an
// estimate of the time left, from each step's cost on the last run here (or the estimate
// below for a step never run).
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ssfusion/ssfusion/experiments"
	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// step is one command of the reproduction and the folder it writes.
type step struct {
	name string
	out  string        // under results/; moved aside when it holds another revision's results
	args []string      // the binary's arguments; a first word "tools/..." runs that script instead
	est  time.Duration // the cost on the development machine, before any run here measured it
	// reportsMisses: the command exits with status 1, after writing its report, when a
	// prediction misses its tolerance. The misses are a finding the report states, so such
	// an exit finishes the step when the run wrote its report (any earlier one is removed
	// before it starts).
	reportsMisses bool
}

// papersSetting are the flags of the simulations at the SSFusion paper's setting.
var papersSetting = []string{"--profile", "resnet50,vgg16,bert-base", "--bandwidth", "10Gbit", "--workers", "8", "--validate=false"}

// papersScale simulates ExDyna's and SAFusion's own claims: selection cost and throughput
// as workers are added, against the sparsifying baselines, at the SSFusion testbed's link.
var papersScale = []string{"--profile", "resnet50,bert-base", "--bandwidth", "10Gbit", "--latency", "37us", "--workers", "8,16,32,64",
	"--pipelines", "pertensor,multitensor,exdyna,safusion,omgs,oktopk,spardl,cupcake", "--steps", "16", "--warmup", "12", "--validate=false"}

func simulation(name string, est time.Duration, extra ...string) step {
	args := append([]string{"simulate"}, extra...)
	return step{name: name, out: name, args: append(args, "--out", "results/"+name), est: est}
}

func experiment(name string, est time.Duration) step {
	return step{name: name, out: name, args: []string{"run", "experiments/" + name + ".yaml"}, est: est}
}

// steps is the reproduction, cheap steps first so that a short session finishes many.
func steps() []step {
	headlinePipelines := []string{"--pipelines", "dense,pertensor,multitensor,ssfusion,omgs,oktopk,spardl,cupcake,powersgd", "--steps", "60", "--warmup", "45"}
	return []step{
		{name: "fashion-mnist", args: []string{"data", "fetch", "fashion-mnist"}, est: time.Minute},
		experiment("headline", 5*time.Minute),
		experiment("fidelity", 5*time.Minute),
		experiment("regime", 10*time.Minute),
		experiment("selection", 15*time.Minute),
		experiment("alignment", 15*time.Minute),
		experiment("papers", 25*time.Minute),
		experiment("exdyna", 60*time.Minute),
		experiment("convergence", 250*time.Minute),
		simulation("simulate", 15*time.Minute),
		simulation("simulate-gpu", 15*time.Minute, "--selection", "gpu", "--validate=false"),
		simulation("simulate-8workers-cpu", 2*time.Minute, append(slices.Clone(papersSetting), "--selection", "cpu")...),
		simulation("simulate-8workers-gpu", 2*time.Minute, append(slices.Clone(papersSetting), "--selection", "gpu")...),
		simulation("simulate-8workers-cpu-37us", 2*time.Minute, append(slices.Clone(papersSetting), "--selection", "cpu", "--latency", "37us")...),
		simulation("simulate-8workers-gpu-37us", 2*time.Minute, append(slices.Clone(papersSetting), "--selection", "gpu", "--latency", "37us")...),
		simulation("simulate-8workers-cpu-rank", time.Minute, append(slices.Clone(papersSetting), "--selection", "cpu", "--select-rule", "rank", "--pipelines", "ssfusion")...),
		simulation("simulate-8workers-gpu-rank", time.Minute, append(slices.Clone(papersSetting), "--selection", "gpu", "--select-rule", "rank", "--pipelines", "ssfusion")...),
		simulation("simulate-headline-cpu", 20*time.Minute, append(append(slices.Clone(papersSetting), "--selection", "cpu"), headlinePipelines...)...),
		simulation("simulate-headline-gpu", 20*time.Minute, append(append(slices.Clone(papersSetting), "--selection", "gpu"), headlinePipelines...)...),
		simulation("simulate-papers-cpu", 15*time.Minute, append(slices.Clone(papersScale), "--selection", "cpu")...),
		simulation("simulate-papers-gpu", 15*time.Minute, append(slices.Clone(papersScale), "--selection", "gpu")...),
		{name: "validation-wide", out: "validation-wide", est: 20 * time.Minute, reportsMisses: true,
			args: []string{"simulate", "--validate-only", "--validation", "experiments/validation-wide.yaml", "--out", "results/validation-wide"}},
		{name: "maps", out: "maps", args: []string{"tools/maps/run.sh"}, est: 100 * time.Minute},
	}
}

// state is results/reproduce.json: what ran at which revision.
type state struct {
	Revision string                `json:"revision"`
	Steps    map[string]*stepState `json:"steps"`
}

type stepState struct {
	Revision string    `json:"revision"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Seconds  float64   `json:"seconds,omitempty"` // the time the step took, resumed parts summed
	Command  string    `json:"command"`
}

const stateFile = "results/reproduce.json"

func main() {
	list := flag.Bool("list", false, "list the steps, their estimated cost and their state, and stop")
	only := flag.String("only", "", "comma-separated steps to run (default: every step)")
	restart := flag.Bool("restart", false, "start a new reproduction at HEAD instead of going on with the one under way")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := reproduce(ctx, *list, *only, *restart); err != nil {
		fmt.Fprintln(os.Stderr, "reproduce:", err)
		os.Exit(1)
	}
}

func reproduce(ctx context.Context, list bool, only string, restart bool) error {
	all := steps()
	chosen, err := choose(all, only)
	if err != nil {
		return err
	}
	st, err := loadState()
	if err != nil {
		return err
	}
	rev := st.Revision
	if rev == "" || restart {
		if rev, err = headRevision(); err != nil {
			return err
		}
		if !list {
			if err := checkClean(); err != nil {
				return err
			}
		}
	}
	if list {
		printSteps(chosen, st, rev)
		return nil
	}
	tree, bin, err := prepare(rev)
	if err != nil {
		return err
	}
	st.Revision = rev
	start := time.Now()
	for i, s := range chosen {
		if done(st, s, rev) {
			continue
		}
		fmt.Printf("\n== [%d/%d] %s: %s spent, about %s left; %s\n", i+1, len(chosen), s.name,
			roundDuration(time.Since(start)), roundDuration(remaining(chosen[i:], st, rev)), s.command())
		if err := runStep(ctx, s, tree, bin, rev, st); err != nil {
			return fmt.Errorf("step %s: %w", s.name, err)
		}
	}
	fmt.Printf("\nreproduction at revision %s complete: %s in this session, %s over all steps (%s)\n",
		rev, roundDuration(time.Since(start)), roundDuration(total(chosen, st)), stateFile)
	return nil
}

func choose(all []step, only string) ([]step, error) {
	if only == "" {
		return all, nil
	}
	var out []step
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(all, func(s step) bool { return s.name == name })
		if i < 0 {
			var names []string
			for _, s := range all {
				names = append(names, s.name)
			}
			return nil, fmt.Errorf("no step called %q (steps: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func loadState() (*state, error) {
	st := &state{Steps: map[string]*stepState{}}
	raw, err := os.ReadFile(stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", stateFile, err)
	}
	if st.Steps == nil {
		st.Steps = map[string]*stepState{}
	}
	return st, nil
}

func (st *state) save() error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(stateFile, append(raw, '\n'))
}

func headRevision() (string, error) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("reading the revision (run from the repository's root): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkClean refuses uncommitted changes outside results/: the binary is built from HEAD,
// and what the steps run must be what HEAD says.
func checkClean() error {
	out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").Output()
	if err != nil {
		return fmt.Errorf("checking the checkout: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("the checkout has uncommitted changes outside results/; commit or stash them first:\n%s", s)
	}
	return nil
}

// prepare makes a checkout of revision rev under bin/ (ignored by git) and builds the
// program there, stamped with the revision; then it links the checkout's results/ and data/
// to this checkout's, so that the steps, run there, read this checkout's data and write its
// results. It returns the checkout and the binary; both are reused when there.
//
// The checkout is a clone sharing this repository's objects, not a git worktree: a
// worktree's .git is a file, which the go command does not take for a repository, so it
// would stamp the binary with the enclosing checkout's HEAD and its uncommitted results.
func prepare(rev string) (tree, bin string, err error) {
	short := rev[:12]
	if tree, err = filepath.Abs(filepath.Join("bin", "tree-"+short)); err != nil {
		return "", "", err
	}
	if bin, err = filepath.Abs(filepath.Join("bin", "ssfusion-"+short)); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(tree, ".git")); errors.Is(err, os.ErrNotExist) {
		fmt.Printf("checking out revision %s in %s\n", rev, tree)
		if err := checkout(rev, tree); err != nil {
			return "", "", err
		}
	}
	if _, err := os.Stat(bin); errors.Is(err, os.ErrNotExist) {
		// Built before results/ and data/ are linked: git would call the tree modified.
		fmt.Printf("building revision %s into %s\n", rev, bin)
		if err := runQuiet(tree, "go", "build", "-buildvcs=true", "-o", bin+".tmp", "."); err != nil {
			return "", "", err
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return "", "", err
		}
	}
	// A binary kept from an earlier run is checked too: what it stamps is what every
	// result will claim.
	if err := verifyStamp(bin, rev); err != nil {
		return "", "", fmt.Errorf("%w (delete it to build it afresh)", err)
	}
	for _, dir := range []string{"results", "data"} {
		if err := linkInto(tree, dir); err != nil {
			return "", "", err
		}
	}
	return tree, bin, nil
}

// checkout clones this repository into tree, sharing its objects, at revision rev.
func checkout(rev, tree string) error {
	if err := os.RemoveAll(tree); err != nil {
		return err
	}
	if err := runQuiet("", "git", "clone", "--quiet", "--shared", "--no-checkout", ".", tree); err != nil {
		return err
	}
	return runQuiet(tree, "git", "checkout", "--quiet", "--detach", rev)
}

// verifyStamp checks that the go command stamped the binary with revision rev and an
// unmodified tree, which every result it writes will record.
func verifyStamp(bin, rev string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("reading %s's build information: %w", bin, err)
	}
	got := map[string]string{}
	for _, s := range info.Settings {
		got[s.Key] = s.Value
	}
	if got["vcs.revision"] != rev || got["vcs.modified"] != "false" {
		return fmt.Errorf("%s is stamped with revision %q, modified %q; want %s, unmodified", bin, got["vcs.revision"], got["vcs.modified"], rev)
	}
	return nil
}

// linkInto makes tree/dir a link to this checkout's dir (created if missing), replacing
// what the checkout of the revision put there.
func linkInto(tree, dir string) error {
	target, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	link := filepath.Join(tree, dir)
	if dest, err := os.Readlink(link); err == nil && dest == target {
		return nil
	}
	if err := os.RemoveAll(link); err != nil {
		return err
	}
	return os.Symlink(target, link)
}

// runQuiet runs a command in dir, showing its output only when it fails.
func runQuiet(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func done(st *state, s step, rev string) bool {
	ss := st.Steps[s.name]
	return ss != nil && ss.Revision == rev && !ss.Finished.IsZero()
}

// runStep runs one step, moving aside the folder of another revision's results first, and
// records its state before and after.
func runStep(ctx context.Context, s step, tree, bin, rev string, st *state) error {
	ss := st.Steps[s.name]
	if ss == nil || ss.Revision != rev {
		if err := moveAside(s, ss); err != nil {
			return err
		}
		ss = &stepState{Revision: rev, Started: time.Now(), Command: s.command()}
		st.Steps[s.name] = ss
	}
	ss.Finished = time.Time{}
	if err := st.save(); err != nil {
		return err
	}
	if s.reportsMisses {
		// A report left from before cannot pass for this run's: file times are too coarse
		// to tell them apart.
		if err := os.Remove(s.report()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	began := time.Now()
	err := s.cmd(ctx, tree, bin).Run()
	ss.Seconds += time.Since(began).Seconds()
	if s.missesReported(err) {
		fmt.Printf("%s: some predictions miss their tolerance; %s says which\n", s.name, s.report())
		err = nil
	}
	if err == nil {
		ss.Finished = time.Now()
	}
	if serr := st.save(); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// missesReported reports whether err, the step's command's end, is a step that reports
// misses exiting with status 1 after it wrote its report.
func (s step) missesReported(err error) bool {
	var exit *exec.ExitError
	if !s.reportsMisses || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		return false
	}
	_, serr := os.Stat(s.report())
	return serr == nil
}

func (s step) report() string { return filepath.Join("results", s.out, "report.md") }

// moveAside moves the step's folder to results/.previous/ when it holds results that this
// revision did not make; nothing when there is no folder.
func moveAside(s step, prev *stepState) error {
	if s.out == "" {
		return nil
	}
	dir := filepath.Join("results", s.out)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	label := "unrecorded"
	if prev != nil {
		label = prev.Revision[:min(12, len(prev.Revision))]
	}
	dest := filepath.Join("results", ".previous", s.out+"-"+label+"-"+time.Now().UTC().Format("20060102T150405"))
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	fmt.Printf("moving %s, of an earlier revision, to %s\n", dir, dest)
	if err := os.Rename(dir, dest); err != nil {
		return err
	}
	return keepAnalysis(dest, dir)
}

// keepAnalysis moves an experiment's hand-written analysis from the folder set aside back
// into the step's folder: it reads the results through marked figures, which `ssfusion
// figures` rewrites from the new ones, and only its prose needs a reader's second look.
func keepAnalysis(from, to string) error {
	src := filepath.Join(from, experiments.AnalysisFile)
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	return os.Rename(src, filepath.Join(to, experiments.AnalysisFile))
}

func (s step) command() string {
	if strings.HasPrefix(s.args[0], "tools/") {
		return strings.Join(s.args, " ")
	}
	return "ssfusion " + strings.Join(s.args, " ")
}

// cmd is the step's process in the checkout tree: the binary, or the checkout's script
// told to use it through SSF_BIN.
func (s step) cmd(ctx context.Context, tree, bin string) *exec.Cmd {
	var cmd *exec.Cmd
	if strings.HasPrefix(s.args[0], "tools/") {
		cmd = exec.CommandContext(ctx, filepath.Join(tree, s.args[0]), s.args[1:]...)
		cmd.Env = append(os.Environ(), "SSF_BIN="+bin)
	} else {
		cmd = exec.CommandContext(ctx, bin, s.args...)
	}
	cmd.Dir = tree
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// An interrupt reaches the step's own process group through the terminal; give it time
	// to save what it has.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

// cost is what a step takes: its time at this revision once finished, else its last
// measured time at any revision, else the estimate.
func cost(s step, st *state) time.Duration {
	if ss := st.Steps[s.name]; ss != nil && !ss.Finished.IsZero() && ss.Seconds > 0 {
		return time.Duration(ss.Seconds * float64(time.Second))
	}
	return s.est
}

func remaining(left []step, st *state, rev string) time.Duration {
	var d time.Duration
	for _, s := range left {
		if !done(st, s, rev) {
			d += cost(s, st)
		}
	}
	return d
}

func total(all []step, st *state) time.Duration {
	var d time.Duration
	for _, s := range all {
		d += cost(s, st)
	}
	return d
}

func printSteps(all []step, st *state, rev string) {
	fmt.Printf("revision %s\n", rev)
	for _, s := range all {
		state := "to do"
		if ss := st.Steps[s.name]; ss != nil {
			switch {
			case ss.Revision != rev:
				state = "done at another revision " + ss.Revision[:min(12, len(ss.Revision))]
			case ss.Finished.IsZero():
				state = "started"
			default:
				state = "done"
			}
		}
		fmt.Printf("%-28s %8s  %-30s %s\n", s.name, roundDuration(cost(s, st)), state, s.command())
	}
	fmt.Printf("total %s; left at this revision %s\n", roundDuration(total(all, st)), roundDuration(remaining(all, st, rev)))
}

func roundDuration(d time.Duration) string {
	if d >= time.Hour {
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.0f min", d.Minutes())
}
