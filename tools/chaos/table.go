package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// table renders the outcomes as a Markdown table, a row per kind of fault and one for
// all: trials, each verdict, and the median and worst time from the fault to the job's
// end over the trials that failed.
func table(outcomes []outcome) string {
	var b strings.Builder
	b.WriteString("| fault | trials | survived | failed cleanly | violated | detected in (median) | (worst) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, of []outcome) {
		count := func(v string) int {
			n := 0
			for _, o := range of {
				if o.verdict == v {
					n++
				}
			}
			return n
		}
		var times []time.Duration
		for _, o := range of {
			if o.detect > 0 {
				times = append(times, o.detect)
			}
		}
		median, worst := "-", "-"
		if len(times) > 0 {
			slices.Sort(times)
			median = fmt.Sprintf("%.2f s", times[len(times)/2].Seconds())
			worst = fmt.Sprintf("%.2f s", times[len(times)-1].Seconds())
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s |\n", name, len(of), count(survived), count(failedCleanly), count(violated), median, worst)
	}
	for _, kind := range allKinds {
		var of []outcome
		for _, o := range outcomes {
			if o.trial.kind == kind {
				of = append(of, o)
			}
		}
		if len(of) > 0 {
			row(kind, of)
		}
	}
	row("all", outcomes)
	return b.String()
}
