package launch

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// workerAttr makes the kernel kill a worker when the launcher dies, however it dies.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// workerCPUs splits the CPUs this process may run on into one disjoint share per worker,
// in order, as mpirun binds its ranks to cores by default. Unbound, the kernel sometimes
// runs two ranks of a job on one core while the other idles, which doubles the latency of
// every small collective between them. It returns nil, leaving placement to the kernel,
// when there are fewer CPUs than workers or EnvBind is "none".
func workerCPUs(workers int) [][]int {
	if os.Getenv(EnvBind) == "none" {
		return nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	share := len(cpus) / workers
	if share == 0 {
		return nil
	}
	shares := make([][]int, workers)
	for w := range shares {
		shares[w] = cpus[w*share : (w+1)*share]
	}
	return shares
}

// startOn starts cmd on the given CPUs, or anywhere when cpus is empty. A child inherits
// the affinity of the thread that forks it, and every thread of the child descends from
// its first, so the mask is set on this thread around the fork; unlike setting it on the
// child afterwards, this leaves no thread of the child unbound.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return cmd.Start()
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return cmd.Start()
	}
	defer unix.SchedSetaffinity(0, &old)
	return cmd.Start()
}
