package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// twoNodes is a pair of network namespaces joined by a veth link: two machines on one,
// which a partition trial cuts apart.
type twoNodes struct {
	ns   [2]string
	link [2]string
	addr [2]string
}

// newTwoNodes creates the namespaces of trial id; it fails with errUnsupported where
// network namespaces cannot be made (no root, no iproute2).
func newTwoNodes(id int) (*twoNodes, error) {
	n := &twoNodes{
		ns:   [2]string{fmt.Sprintf("ssfchaos-%d-a", id), fmt.Sprintf("ssfchaos-%d-b", id)},
		link: [2]string{fmt.Sprintf("ssfc%da", id), fmt.Sprintf("ssfc%db", id)},
		addr: [2]string{"10.213.0.1", "10.213.0.2"},
	}
	steps := [][]string{
		{"netns", "add", n.ns[0]},
		{"netns", "add", n.ns[1]},
		{"link", "add", n.link[0], "netns", n.ns[0], "type", "veth", "peer", "name", n.link[1], "netns", n.ns[1]},
	}
	for i := range 2 {
		steps = append(steps,
			[]string{"-n", n.ns[i], "addr", "add", n.addr[i] + "/24", "dev", n.link[i]},
			[]string{"-n", n.ns[i], "link", "set", n.link[i], "up"},
			[]string{"-n", n.ns[i], "link", "set", "lo", "up"})
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			n.remove()
			return nil, fmt.Errorf("%w: ip %s: %v %s", errUnsupported, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return n, nil
}

// throttle makes node 0's side of the link a slow, lossy one: a token bucket of 20 Mbit/s
// whose queue holds 2 ms of traffic, so that bursts are delayed and what overflows is
// dropped, as on a congested link.
func (n *twoNodes) throttle() error {
	args := []string{"-n", n.ns[0], "qdisc", "add", "dev", n.link[0], "root", "tbf", "rate", "20mbit", "burst", "8kb", "latency", "2ms"}
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: tc %s: %v %s", errUnsupported, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dropped is how many packets node 0's side of the link has dropped.
func (n *twoNodes) dropped() string {
	out, err := exec.Command("tc", "-n", n.ns[0], "-s", "qdisc", "show", "dev", n.link[0]).CombinedOutput()
	if err != nil {
		return "?"
	}
	if _, after, ok := strings.Cut(string(out), "dropped "); ok {
		return strings.TrimRight(strings.Fields(after)[0], ",")
	}
	return "?"
}

// cut takes node 0's end of the link down, or up again: packets stop without a reset,
// as when a switch fails.
func (n *twoNodes) cut(down bool) error {
	state := "up"
	if down {
		state = "down"
	}
	if out, err := exec.Command("ip", "-n", n.ns[0], "link", "set", n.link[0], state).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s: %v %s", state, err, out)
	}
	return nil
}

func (n *twoNodes) remove() {
	for _, ns := range n.ns {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// nodeArgs is the command line of one node's launcher in a two-node job of t's setup,
// its workers split evenly, rank 0 on node 0.
func (c *campaign) nodeArgs(t trial, n *twoNodes, node, port int, resume bool) []string {
	args := c.job.trainArgs(setup{transport: t.setup.transport, workers: t.setup.workers / 2}, "out")
	if resume {
		args = []string{"train", "--resume", "out", "--timeout", c.job.timeout.String()}
	}
	args = append(args, "--nnodes", "2", "--node-rank", strconv.Itoa(node), "--master-addr", n.addr[0],
		"--master-port", strconv.Itoa(port), "--bind-addr", n.addr[node])
	return append([]string{"netns", "exec", n.ns[node], c.job.bin}, args...)
}

// runPartition runs t's job on two nodes and, after t.step, cuts the link between them
// (partition) or makes it slow and lossy (lossy). A cut must make both nodes' launchers
// fail within the time limit naming a rank; a lossy link may be survived, with the
// parameters of a run without the fault, or fail the same way. After a failure it mends
// the link, resumes on both nodes and checks the parameters. It returns whether the fault
// failed the job.
func (c *campaign) runPartition(t trial, dir string, o *outcome, fail func(string, ...any)) bool {
	n, err := newTwoNodes(t.id)
	if err != nil {
		o.note = "skipped: " + err.Error()
		return false
	}
	defer n.remove()
	want, err := c.checksum(t.setup)
	if err != nil {
		fail("%v", err)
		return false
	}
	env := append(t.setup.env(), "SSF_JOB_TOKEN="+fmt.Sprintf("chaos-%d-%d", t.seed, t.id))
	start2 := func(resume bool, port int, await string) ([2]*run, bool) {
		var runs [2]*run
		for node := range 2 {
			a := ""
			if node == 0 {
				a = await
			}
			r, err := start(dir, "ip", c.nodeArgs(t, n, node, port, resume), env, a)
			if err != nil {
				fail("%v", err)
				return runs, false
			}
			runs[node] = r
		}
		return runs, true
	}
	runs, ok := start2(false, 29500+t.id%500, fmt.Sprintf("step %d/", t.step))
	if !ok {
		return false
	}
	select {
	case <-runs[0].seen:
	case <-runs[0].done:
	case <-time.After(c.job.trialTime):
	}
	struck := time.Now()
	lossy := t.kind == kindLossy
	if lossy {
		if err := n.throttle(); err != nil {
			o.note = "skipped: " + err.Error()
		}
	} else if err := n.cut(true); err != nil {
		fail("%v", err)
	}
	failed := false
	for node, r := range runs {
		if err := r.wait(c.job.trialTime); err != nil {
			fail("node %d: %v", node, err)
		}
		switch {
		case r.exitCode() == 0 && !lossy:
			fail("node %d finished across a cut link:\n%s", node, tail(r.output(), 4))
		case r.exitCode() != 0 && !strings.Contains(r.output(), "rank "):
			fail("node %d failed without naming a rank:\n%s", node, tail(r.output(), 4))
		}
		failed = failed || r.exitCode() != 0
		if !r.groupGone() {
			fail("processes of node %d are still running", node)
		}
		if d := r.ended.Sub(struck); d > o.detect && r.exitCode() != 0 {
			o.detect = d
		}
	}
	if lossy {
		o.note = strings.TrimSpace(o.note + " " + n.dropped() + " packets dropped")
	}
	out := filepath.Join(dir, "out")
	for _, p := range halfWritten(out) {
		fail("half-written: %s", p)
	}
	if !failed {
		if got, err := finalChecksum(out); err != nil || got != want {
			fail("parameters %s (%v) after the slow link, want %s as without the fault", got, err, want)
		}
		return false
	}
	if err := n.cut(false); err != nil {
		fail("%v", err)
		return false
	}
	exec.Command("tc", "-n", n.ns[0], "qdisc", "del", "dev", n.link[0], "root").Run()
	runs, ok = start2(hasCheckpoint(out), 30000+t.id%500, "")
	if !ok {
		return false
	}
	for node, r := range runs {
		if err := r.wait(c.job.trialTime); err != nil || r.exitCode() != 0 {
			fail("node %d's rerun failed (%v, exit %d):\n%s", node, err, r.exitCode(), tail(r.output(), 6))
		}
	}
	if got, err := finalChecksum(out); err != nil {
		fail("after the rerun: %v", err)
	} else if got != want {
		fail("parameters %s after the rerun, want %s as without the fault", got, want)
	}
	checkRerun(out, fail)
	return true
}
