// Command chaos injects faults into real multi-process trainings and checks, after each
// trial, the invariants the project promises: the job ends within its time limit, with an
// error naming the rank at fault (or finishes correctly when the fault was survivable);
// no result file is half-written; nothing outside the results is touched; no process or
// shared memory segment is left behind; and rerunning resumes and ends with parameters
// bit-identical to a run without the fault.
//
// Each trial draws, from the campaign's seed and its number, the transport (TCP or shared
// memory), the number of workers (2 or 4), the rank hit and the moment. The kinds of fault
// are kill (SIGKILL), stop (SIGSTOP past the timeout), slow (a stall shorter than it),
// frame (a crash at a transport's fault point: before a send, in the middle of a frame,
// after a send, at a shared memory step), reset (a rank's connections drop there), write
// (a crash while a checkpoint or result file is written), corrupt (a checkpoint file
// truncated or with a bit flipped, then resumed from), disk-full (results on a file
// system too small; needs root to mount a tmpfs), experiment (the runner of a 2-cell
// experiment crashes after a cell or while it writes its report), partition (a job of
// two nodes, each a network namespace, whose link is cut mid-training) and lossy (that
// link made slow and lossy by a token bucket); the last two need root and iproute2.
//
// Usage, from the repository's root:
//
//	go run ./tools/chaos -trials 300 -seed 1
//
// It prints a table of trials per kind of fault, survived, failed cleanly and violated,
// with the median and worst time from the fault to the job's end, and exits 1 if any
// trial violated an invariant, listing them with the seed and number that replay them
// (-seed S -only N).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	trials := flag.Int("trials", 16, "trials to run")
	seed := flag.Uint64("seed", 1, "campaign seed: the same seed draws the same trials")
	only := flag.Int("only", -1, "run only the trial of this number (to replay one)")
	kinds := flag.String("kinds", strings.Join(allKinds, ","), "kinds of fault to draw from")
	bin := flag.String("bin", "", "the ssfusion binary (default: built from the module in the current folder)")
	keep := flag.Bool("keep", false, "keep the trials' folders")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runCampaign(ctx, options{trials: *trials, seed: *seed, only: *only, kinds: strings.Split(*kinds, ","), bin: *bin, keep: *keep}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// options are a campaign's settings.
type options struct {
	trials int
	seed   uint64
	only   int
	kinds  []string
	bin    string
	keep   bool
	// timeout is the trainings' --timeout (0: defaultJob's); a campaign on a loaded
	// machine gives its ranks longer before a silent peer fails the job.
	timeout time.Duration
}

// defaultJob is the training of every trial.
func defaultJob(bin string) job {
	return job{bin: bin, steps: 40, every: 10, timeout: 3 * time.Second, trialTime: 90 * time.Second}
}

// runCampaign runs the trials o asks for and writes their table to w; it fails if a trial
// violated an invariant.
func runCampaign(ctx context.Context, o options, w interface{ Write([]byte) (int, error) }) error {
	for _, k := range o.kinds {
		if !contains(allKinds, k) {
			return fmt.Errorf("unknown kind %q (known: %s)", k, strings.Join(allKinds, ", "))
		}
	}
	dir, err := os.MkdirTemp("", "ssfusion-chaos-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	if o.bin == "" {
		if o.bin, err = build(".", dir); err != nil {
			return err
		}
	}
	j := defaultJob(o.bin)
	if o.timeout > 0 {
		j.timeout = o.timeout
	}
	c := &campaign{job: j, dir: dir, reference: map[setup]string{}}
	var outcomes []outcome
	for id := range o.trials {
		if o.only >= 0 && id != o.only {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		t := draw(o.seed, id, o.kinds, c.job)
		oc := c.run(ctx, t)
		outcomes = append(outcomes, oc)
		fmt.Fprintf(w, "trial %d/%d: %s (%s; %s): %s", id+1, o.trials, t.kind, t.setup, t.what, oc.verdict)
		if oc.detect > 0 {
			fmt.Fprintf(w, " in %v", oc.detect.Round(time.Millisecond))
		}
		if oc.note != "" {
			fmt.Fprintf(w, " (%s)", oc.note)
		}
		fmt.Fprintln(w)
		for _, p := range oc.problems {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(p, "\n", "\n    "))
		}
	}
	fmt.Fprintf(w, "\n%s", table(outcomes))
	var bad []string
	for _, oc := range outcomes {
		if oc.verdict == violated {
			bad = append(bad, fmt.Sprintf("-seed %d -only %d", oc.trial.seed, oc.trial.id))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d trials violated an invariant; replay with %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
