package figures

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/internal/testfiles"
)

func fixture(t *testing.T, doc string) (*Sources, string) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"results/exp/comparison.csv":    "group,mean,verdict\na,98.125,equivalent\nb,96.4,lower\n",
		"results/exp/cell/summary.json": `{"throughput": {"samples_per_s": 860.4}, "points": [{"pipeline": "dense", "ms": 12.5}, {"pipeline": "ssfusion", "ms": 10}]}`,
		"results/exp/bad.json":          `{"throughput": `,
		"results/exp/gains.csv":         "model,setting,gain,verdict\nm,,0.5,wins\nm,,-0.25,loses\nm,,-0.5,loses\nm,A,0.125,within model error\nn,A,0.75,wins\n",
		"results/exp/cell/metrics.csv":  "kind,step,density\ntrain,0,0.5\ntrain,1,0.25\neval,1,\ntrain,2,0.125\ntrain,3,x\n",
		"docs/page.md":                  doc,
	}
	testfiles.Write(t, root, files)
	return NewSources(root), root
}

const page = `# Results

| pipeline | accuracy | verdict |
|---|---|---|
| a | <!-- fig %.2f: csv("results/exp/comparison.csv", "a", "mean") -->98.12<!-- /fig -->% | <!-- fig %s: csv("results/exp/comparison.csv", "a", "verdict") -->equivalent<!-- /fig --> |

SSFusion ran at <!-- fig %.0f: json("results/exp/cell/summary.json", "throughput.samples_per_s") -->860<!-- /fig --> samples/s,
<!-- fig %.1f: json("results/exp/cell/summary.json", "points.#(pipeline==\"dense\").ms") / json("results/exp/cell/summary.json", "points.#(pipeline==\"ssfusion\").ms") -->1.2<!-- /fig -->x faster,
a gap of <!-- fig %+.1f: csv("results/exp/comparison.csv", "b", "mean") - csv("results/exp/comparison.csv", "a", "mean") -->-1.7<!-- /fig --> points,
<!-- fig %.1f: sum(json("results/exp/cell/summary.json", "points.#.ms")) -->22.5<!-- /fig --> ms in all,
a density of <!-- fig %.4f: mean(series("results/exp/cell/metrics.csv", "step", 1, 2, "density")) -->0.1875<!-- /fig --> over steps 1 and 2,
losses at <!-- fig %.0f: rows("results/exp/gains.csv", "setting", "", "verdict", "loses") -->2<!-- /fig --> points,
at A <!-- fig %+.3f: cell("results/exp/gains.csv", "gain", "model", "m", "setting", "A") -->+0.125<!-- /fig --> (<!-- fig %s: cell("results/exp/gains.csv", "verdict", "model", "n", "setting", "A") -->wins<!-- /fig --> on n).
`

// TestCheckAndUpdate: figures that match their sources pass; an edited figure is found, with
// its line and both values, and Update writes it back from its source.
func TestCheckAndUpdate(t *testing.T) {
	s, root := fixture(t, page)
	bad, err := s.Check("docs/page.md")
	if err != nil {
		t.Fatal(err)
	}
	// 98.125 prints as 98.12 (its binary value lies just below), 860.4 as 860, 12.5/10 as
	// 1.2 (1.25 is exact, and ties go to even), -1.725 as -1.7.
	if len(bad) != 0 {
		t.Fatalf("figures that differ: %v", bad)
	}
	edited := strings.Replace(page, "-->860<!--", "-->861<!--", 1)
	s, root = fixture(t, edited)
	bad, err = s.Check("docs/page.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0].Quoted != "861" || bad[0].Value != "860" || bad[0].Line != 7 {
		t.Fatalf("after editing a figure: %v, want the one on line 7, 861 where the source gives 860", bad)
	}
	if !strings.Contains(bad[0].String(), `docs/page.md:7: quotes "861"`) {
		t.Errorf("message %q does not name the file, line and quote", bad[0])
	}
	changed, err := s.Update("docs/page.md")
	if err != nil || len(changed) != 1 {
		t.Fatalf("Update: %v, %v", changed, err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs/page.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != page {
		t.Errorf("Update wrote\n%s\nwant\n%s", raw, page)
	}
}

// TestFailingExpressions: every way an expression fails is reported with what was wrong,
// and Update then leaves the file alone.
func TestFailingExpressions(t *testing.T) {
	for _, tc := range []struct{ name, mark, want string }{
		{"missing file", `csv("results/nope.csv", "a", "mean")`, "nope.csv"},
		{"missing row", `csv("results/exp/comparison.csv", "z", "mean")`, `no row "z"`},
		{"missing column", `csv("results/exp/comparison.csv", "a", "median")`, `no column "median"`},
		{"missing key", `json("results/exp/cell/summary.json", "throughput.nope")`, `no value at "throughput.nope"`},
		{"bad JSON", `json("results/exp/bad.json", "throughput")`, "not valid JSON"},
		{"text as a number", `csv("results/exp/comparison.csv", "a", "verdict")`, "is text"},
		{"an empty series", `mean(series("results/exp/cell/metrics.csv", "step", 7, 9, "density"))`, "no density in rows with step from 7 to 9"},
		{"a series of text", `mean(series("results/exp/cell/metrics.csv", "step", 0, 3, "density"))`, `line 6: density is "x"`},
		{"a series' missing column", `mean(series("results/exp/cell/metrics.csv", "epoch", 0, 3, "density"))`, `no column "epoch"`},
		{"a list of text", `len(json("results/exp/cell/summary.json", "points.#.pipeline"))`, `element 0 is "dense", not a number`},
		{"an ambiguous cell", `cell("results/exp/gains.csv", "gain", "setting", "A")`, `2 rows with setting "A", want one`},
		{"no such cell", `cell("results/exp/gains.csv", "gain", "setting", "B")`, `0 rows with setting "B"`},
		{"a cell's missing column", `cell("results/exp/gains.csv", "loss", "setting", "A", "model", "m")`, `no column "loss"`},
		{"a key's missing column", `rows("results/exp/gains.csv", "network", "x")`, `no column "network"`},
		{"keys not in pairs", `rows("results/exp/gains.csv", "setting")`, "keys come in pairs"},
		{"not an expression", `csv(`, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "x <!-- fig %.1f: " + tc.mark + " -->1<!-- /fig -->\n"
			s, root := fixture(t, doc)
			bad, err := s.Check("docs/page.md")
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != 1 || bad[0].Err == nil || !strings.Contains(bad[0].Err.Error(), tc.want) {
				t.Fatalf("Check: %v, want an error saying %q", bad, tc.want)
			}
			if _, err := s.Update("docs/page.md"); err == nil {
				t.Error("Update succeeded")
			}
			if raw, _ := os.ReadFile(filepath.Join(root, "docs/page.md")); string(raw) != doc {
				t.Errorf("Update changed the file: %s", raw)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	for _, tc := range []struct {
		format string
		v      any
		want   string
	}{
		{"%.2f", 98.126, "98.13"}, {"%+.1f", 3.46, "+3.5"}, {"%+.1f", -0.04, "0.0"}, {"%.0f", 859.6, "860"},
		{"%d", 42.0, "42"}, {"%s", "lower", "lower"}, {"%.1f", 7, "7.0"},
	} {
		got, err := formatValue(tc.format, tc.v)
		if err != nil || got != tc.want {
			t.Errorf("formatValue(%q, %v) = %q, %v, want %q", tc.format, tc.v, got, err, tc.want)
		}
	}
	if _, err := formatValue("%d", 4.5); err == nil {
		t.Error("a whole-number verb printed 4.5")
	}
}
