package launch

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLaunchBindsWorkers checks the workers' CPU affinity: with at least as many CPUs as
// workers each gets a disjoint share of the launcher's CPUs, in rank order; with more
// workers than CPUs, with SSF_BIND=none or with GOMAXPROCS set, every worker may run on
// all of them.
func TestLaunchBindsWorkers(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	_, userProcs := os.LookupEnv("GOMAXPROCS")
	for _, tc := range []struct {
		workers int
		bind    string
	}{
		{1, ""}, {len(cpus), ""}, {len(cpus) + 1, ""}, {len(cpus), "none"},
	} {
		t.Run(fmt.Sprintf("workers=%d,bind=%q", tc.workers, tc.bind), func(t *testing.T) {
			t.Setenv(EnvBind, tc.bind)
			err, out, _ := launchHelpers(t, context.Background(), "ok", tc.workers)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out)
			}
			share := len(cpus) / tc.workers
			bound := share > 0 && tc.bind != "none" && !userProcs
			for r := range tc.workers {
				m := regexp.MustCompile(fmt.Sprintf(`\[rank %d\] .* cpus (\S+)`, r)).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("rank %d reported no CPUs:\n%s", r, out)
				}
				got, err := parseCPUList(m[1])
				if err != nil {
					t.Fatal(err)
				}
				want := cpus
				if bound {
					want = cpus[r*share : (r+1)*share]
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("rank %d may run on CPUs %v, want %v", r, got, want)
				}
			}
		})
	}
}

// TestLaunchThreads: workers given their threads run that many and are bound to no core,
// whatever GOMAXPROCS the launcher's environment holds.
func TestLaunchThreads(t *testing.T) {
	all, err := allowedCPUList()
	if err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	t.Setenv("GOMAXPROCS", "1")
	err, out, _ := launchHelpersWith(t, context.Background(), "ok", 2, func(c *Config) { c.Threads = 3 })
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	for r := range 2 {
		m := regexp.MustCompile(fmt.Sprintf(`\[rank %d\] .* gomaxprocs (\S+) cpus (\S+)`, r)).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("rank %d reported no threads:\n%s", r, out)
		}
		got, err := parseCPUList(m[2])
		if err != nil {
			t.Fatal(err)
		}
		if m[1] != "3" || fmt.Sprint(got) != fmt.Sprint(all) {
			t.Errorf("rank %d runs %s threads on CPUs %v, want 3 on every CPU %v", r, m[1], got, all)
		}
	}
}

// allowedCPUList is the CPUs this process may run on.
func allowedCPUList() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// parseCPUList reads Linux's list format: "0-3,6,8-9".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
