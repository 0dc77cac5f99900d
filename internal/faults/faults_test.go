package faults

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []Fault
		err  string
	}{
		{"", nil, ""},
		{"point=cell-done", []Fault{{Point: CellDone, Hit: 1, Rank: -1, Action: "crash"}}, ""},
		{"point=write-before-rename file=summary.json hit=3 rank=1 action=error; point=before-send action=stop",
			[]Fault{{Point: WriteBeforeRename, File: "summary.json", Hit: 3, Rank: 1, Action: "error"}, {Point: "before-send", Hit: 1, Rank: -1, Action: "stop"}}, ""},
		{"point=nowhere", nil, `point "nowhere"`},
		{"point=cell-done action=explode", nil, `action "explode"`},
		{"point=cell-done hit=0", nil, "hit=0: below 1"},
		{"point=cell-done rank=x", nil, "rank=x"},
		{"point=cell-done when=now", nil, `unknown key "when"`},
		{"point cell-done", nil, `"point" is not key=value`},
	} {
		p, err := Parse(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), Env) {
				t.Errorf("Parse(%q): %v, want an error naming %s and saying %q", tc.spec, err, Env, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if len(p.faults) != len(tc.want) {
			t.Errorf("Parse(%q): %+v, want %+v", tc.spec, p.faults, tc.want)
			continue
		}
		for i := range tc.want {
			if p.faults[i] != tc.want[i] {
				t.Errorf("Parse(%q) fault %d: %+v, want %+v", tc.spec, i, p.faults[i], tc.want[i])
			}
		}
	}
}

// TestArriveCountsPerFault: a fault triggers on its hit-th matching arrival only, and
// arrivals of another rank, point or file do not count.
func TestArriveCountsPerFault(t *testing.T) {
	p, err := Parse("point=write-partial file=report.md hit=2 rank=1 action=error")
	if err != nil {
		t.Fatal(err)
	}
	arrivals := []struct {
		point, file string
		rank        int
		fires       bool
	}{
		{WritePartial, "/r/report.md", 0, false},    // another rank
		{WritePartial, "/r/summary.json", 1, false}, // another file
		{WriteBeforeRename, "/r/report.md", 1, false},
		{WritePartial, "/r/report.md", 1, false}, // the first hit
		{WritePartial, "/x/report.md", 1, true},  // the second
		{WritePartial, "/r/report.md", 1, false}, // only once
	}
	for i, a := range arrivals {
		if _, fires := p.arrive(a.point, a.file, a.rank); fires != a.fires {
			t.Errorf("arrival %d (%+v): fires %v", i, a, fires)
		}
	}
	var none *Plan
	if _, fires := none.arrive(CellDone, "", 0); fires {
		t.Error("an empty plan fired")
	}
}

const childEnv = "SSF_FAULTS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// Reach the cell-done point three times; the plan decides what happens.
		for range 3 {
			if err := At(CellDone, ""); err != nil {
				os.Stdout.WriteString(err.Error() + "\n")
				os.Exit(3)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAtInAProcess: the armed process crashes with SIGKILL, or fails with ErrInjected's
// text, at the hit its plan names; a process of another rank runs on.
func TestAtInAProcess(t *testing.T) {
	for _, tc := range []struct {
		name, spec, rank string
		signal           syscall.Signal
		code             int
		output           string
	}{
		{"crash", "point=cell-done hit=2", "0", syscall.SIGKILL, -1, "fault: crash at cell-done (hit 2)"},
		{"error", "point=cell-done hit=3 action=error", "", 0, 3, "injected fault at cell-done"},
		{"other rank", "point=cell-done rank=1", "0", 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "XXX")
			cmd.Env = append(os.Environ(), childEnv+"=1", Env+"="+tc.spec, "RANK="+tc.rank)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case tc.signal != 0:
				ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
				if !ok || !ws.Signaled() || ws.Signal() != tc.signal {
					t.Errorf("ended with %v, want signal %v; output %q", err, tc.signal, out)
				}
			case tc.code == 0 && err != nil, tc.code != 0 && (!errors.As(err, &exit) || exit.ExitCode() != tc.code):
				t.Errorf("ended with %v, want exit code %d; output %q", err, tc.code, out)
			}
			if !strings.Contains(string(out), tc.output) {
				t.Errorf("output %q, want %q", out, tc.output)
			}
		})
	}
}
