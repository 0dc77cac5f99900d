// Command fit-selection measures every selection kind of the scale simulator on this
// machine and prints the body of sim.DefaultSelectionModel: one Linear per kind, fitted
// over log-spaced tensor sizes, with the R² and the worst relative error of each fit so
// that a poor line shows before it goes into the model.
//
// Usage:
//
//	go run ./tools/fit-selection [-density 0.01] [-reps 11] [-runs 9] [-min 1000] [-max 4000000] [-sizes 8] [-kinds topk,lowrank] [-v]
//
// It does what sim.FitSelection does, sim.MeasureSelection per size and then
// sim.FitLinear, but keeps the measured points to judge the fit, and measures every point
// -runs times, keeping the fastest. Each measurement is already a median, which shrugs off
// an interruption; but on a shared machine another process can hold a core for the whole
// of one, and contention only ever adds time, so the fastest of several measurements spread
// over the run (each sweep goes over all kinds and sizes before the next) is the best
// estimate of the machine's own speed. An idle machine is still better.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/compress"
	"github.com/ssfusion/ssfusion/sim"
)

func main() {
	density := flag.Float64("density", 0.01, "fraction of the elements selected")
	reps := flag.Int("reps", 11, "timed batches per measurement; the median is kept")
	runs := flag.Int("runs", 9, "measurements per size; the fastest is kept")
	minN := flag.Int("min", 1000, "smallest tensor size")
	maxN := flag.Int("max", 4_000_000, "largest tensor size")
	points := flag.Int("sizes", 8, "number of log-spaced sizes from -min to -max")
	verbose := flag.Bool("v", false, "print every measured point on stderr")
	only := flag.String("kinds", "", "comma-separated kinds to measure (default: every selector, threshold and lowrank)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("fit-selection: ")
	if *minN < 1 || *maxN <= *minN || *points < 2 || *runs < 1 {
		log.Fatal("want 1 <= -min < -max, -sizes >= 2 and -runs >= 1")
	}

	sizes := logSizes(*minN, *maxN, *points)
	// "sampled" is not measured: it is the same selector as "dgc" and gets its line.
	kinds := append(compress.SelectorNames(), compress.ThresholdKind, compress.LowRankKind)
	if *only != "" {
		kinds = strings.Split(*only, ",")
	}

	best := make([][]time.Duration, len(kinds))
	for i := range best {
		best[i] = make([]time.Duration, len(sizes))
	}
	for range *runs {
		for i, kind := range kinds {
			for j, n := range sizes {
				t, err := sim.MeasureSelection(kind, n, *density, *reps)
				if err != nil {
					log.Fatal(err)
				}
				if best[i][j] == 0 || t < best[i][j] {
					best[i][j] = t
				}
			}
		}
	}

	type result struct {
		kind       string
		fit        sim.Linear
		r2, maxRel float64
	}
	var results []result
	for i, kind := range kinds {
		times := best[i]
		fit, err := sim.FitLinear(sizes, times)
		if err != nil {
			log.Fatalf("%s: %v", kind, err)
		}
		r2, maxRel := quality(fit, sizes, times)
		if *verbose {
			for j, n := range sizes {
				p := fit.At(n)
				fmt.Fprintf(os.Stderr, "%-10s n=%-8d measured %-12v line %-12v %+6.1f%%\n",
					kind, n, times[j], p, 100*(float64(p)-float64(times[j]))/float64(times[j]))
			}
		}
		results = append(results, result{kind, fit, r2, maxRel})
	}

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "// Fitted %s on %s (GOMAXPROCS=%d) by\n//\n//\tgo run ./tools/fit-selection%s\n//\n",
		time.Now().Format(time.DateOnly), cpuModel(), runtime.GOMAXPROCS(0), flagArgs())
	fmt.Fprintf(w, "// (sizes %d to %d, %d log-spaced, the fastest of %d medians each; fit to relative\n", *minN, *maxN, *points, *runs)
	fmt.Fprintf(w, "// error, see FitLinear). Worst relative error of the line against the measured points,\n")
	fmt.Fprintf(w, "// and R² of the fit:\n//\n")
	for _, r := range results {
		fmt.Fprintf(w, "//\t%-10s max %.0f%%  R² %.4f\n", r.kind, 100*r.maxRel, r.r2)
	}
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "%-12s {PerCallNS: %s, PerElementNS: %s},\n",
			strconv.Quote(r.kind)+":", format(r.fit.PerCallNS), format(r.fit.PerElementNS))
	}
}

// logSizes returns n sizes from lo to hi, evenly spaced in log(size), rounded.
func logSizes(lo, hi, n int) []int {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = int(math.Round(float64(lo) * math.Pow(float64(hi)/float64(lo), float64(i)/float64(n-1))))
	}
	return sizes
}

// quality returns the R² of fit on the points, which the largest sizes dominate, and the
// worst relative error, which the smallest usually set; together they say whether one line
// serves the whole range.
func quality(fit sim.Linear, sizes []int, times []time.Duration) (r2, maxRel float64) {
	var mean float64
	for _, t := range times {
		mean += float64(t)
	}
	mean /= float64(len(times))
	var res, tot float64
	for i, n := range sizes {
		y, p := float64(times[i]), float64(fit.At(n))
		res += (y - p) * (y - p)
		tot += (y - mean) * (y - mean)
		maxRel = max(maxRel, math.Abs(p-y)/y)
	}
	return 1 - res/tot, maxRel
}

// format prints a coefficient with four significant digits: the measurements are not
// more precise than that, and shorter constants read better in the source.
func format(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// flagArgs returns every flag that changes the fit, defaults included, so that the
// comment reproduces the run even after a default changes.
func flagArgs() string {
	var b strings.Builder
	flag.VisitAll(func(f *flag.Flag) {
		if f.Name != "v" {
			fmt.Fprintf(&b, " -%s %s", f.Name, f.Value)
		}
	})
	return b.String()
}

// cpuModel names the processor from /proc/cpuinfo, or GOARCH where there is none.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				if _, v, ok := strings.Cut(name, ":"); ok {
					return fmt.Sprintf("%s, %d CPUs", strings.TrimSpace(v), runtime.NumCPU())
				}
			}
		}
	}
	return runtime.GOARCH
}
