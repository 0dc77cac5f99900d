package experiments

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPairs: each group a pair names is tested against its counterpart of the same setting
// on the axes the pair leaves alone: multi-tensor against per-tensor of its task and
// density, and SSFusion against per-tensor at the density SSFusion sends, of its task.
func TestPairs(t *testing.T) {
	dir := t.TempDir()
	acc := map[string][]float64{
		"task-easy_sparsity-d0.01_pipeline-pertensor":   {97.1, 97.3, 96.9, 97.2, 97.0},
		"task-easy_sparsity-d0.01_pipeline-multitensor": {98.1, 98.3, 97.9, 98.2, 98.0},
		"task-easy_sparsity-d0.01_pipeline-ssfusion":    {98.3, 98.2, 98.4, 98.25, 98.35},
		"task-easy_sparsity-sent_pipeline-pertensor":    {98.3, 98.2, 98.4, 98.25, 98.35},
		"task-easy_sparsity-sent_pipeline-multitensor":  {98.5, 98.6, 98.4, 98.55, 98.45},
		"task-hard_sparsity-d0.01_pipeline-pertensor":   {85, 86, 85.5, 85.2, 85.3},
		"task-hard_sparsity-d0.01_pipeline-multitensor": {88, 92, 86, 93, 90},
		"task-hard_sparsity-d0.01_pipeline-ssfusion":    {90, 90.5, 91, 90.2, 90.3},
		"task-hard_sparsity-sent_pipeline-pertensor":    {90, 90.5, 91, 90.2, 90.3},
		"task-hard_sparsity-sent_pipeline-multitensor":  {90, 90.5, 91, 90.2, 90.3},
		"task-easy_sparsity-d0.01_pipeline-dense":       {98.3, 98.2, 98.4, 98.25, 98.35},
		"task-hard_sparsity-d0.01_pipeline-dense":       {91, 91.5, 92, 91.2, 91.3},
	}
	s, cells := seededExperiment(t, dir, `
name: pairs
compare:
  reference: dense
  margin: 0.5
  pairs:
    - {group: {pipeline: multitensor}, against: {pipeline: pertensor}}
    - {group: {pipeline: ssfusion}, against: {pipeline: multitensor, sparsity: sent}}
base: {workers: 2}
matrix:
  task:
    - {name: easy, lr: 0.1}
    - {name: hard, lr: 0.05}
  sparsity:
    - {name: d0.01, density: 0.01}
    - {name: sent, density: 0.2}
  pipeline: [dense, pertensor, multitensor, ssfusion]
  seed: [1, 2, 3, 4, 5]
exclude:
  - {sparsity: sent, pipeline: [dense, ssfusion]}
`, acc, accuracyAndTraffic)
	out := filepath.Join(dir, "pairs")
	if err := WriteReport(s, cells, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"## Pairs",
		"| task-easy_sparsity-d0.01_pipeline-multitensor | task-easy_sparsity-d0.01_pipeline-pertensor | 5, 5 | +1.00 [", "| higher |",
		"| task-easy_sparsity-sent_pipeline-multitensor | task-easy_sparsity-sent_pipeline-pertensor | 5, 5 | +0.20 [",
		"| task-hard_sparsity-d0.01_pipeline-multitensor | task-hard_sparsity-d0.01_pipeline-pertensor | 5, 5 | +4.40 [",
		"| task-easy_sparsity-d0.01_pipeline-ssfusion | task-easy_sparsity-sent_pipeline-multitensor | 5, 5 | -0.20 [",
		"| task-hard_sparsity-d0.01_pipeline-ssfusion | task-hard_sparsity-sent_pipeline-multitensor | 5, 5 | +0.00 [",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// Four multi-tensor groups and two SSFusion groups: six tests, no more.
	section, _, _ := strings.Cut(md[strings.Index(md, "## Pairs"):], "pairs.csv")
	if got := strings.Count(section, "\n| task-"); got != 6 {
		t.Errorf("%d pair rows, want 6:\n%s", got, md)
	}
	csv, err := os.ReadFile(filepath.Join(out, "pairs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pair,group,against,seeds,mean,against_seeds,against_mean,difference,difference_low,difference_high,p,p_equivalence,margin,verdict\n",
		"task-easy_sparsity-d0.01_pipeline-ssfusion vs task-easy_sparsity-sent_pipeline-multitensor,task-easy_sparsity-d0.01_pipeline-ssfusion,task-easy_sparsity-sent_pipeline-multitensor,5,98.3,5,98.4",
		",\"equivalent, though lower\"\n",
	} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("pairs.csv lacks %q:\n%s", want, csv)
		}
	}
}

// A pair whose counterpart was left out of the matrix says so in its row, as does one
// whose counterpart is the group itself.
func TestPairWithoutCounterpart(t *testing.T) {
	acc := map[string][]float64{
		"density-0.01_pipeline-pertensor": {97, 97.2}, "density-0.05_pipeline-pertensor": {98, 98.2},
		"density-0.01_pipeline-dense": {99, 99.1},
	}
	s, cells := seededExperiment(t, t.TempDir(), `
name: lone
compare: {reference: dense, margin: 0.5, pairs: [{group: {density: 0.05}, against: {pipeline: dense}}, {group: {pipeline: pertensor}, against: {density: 0.01}}]}
base: {workers: 2}
matrix:
  density: [0.01, 0.05]
  pipeline: [dense, pertensor]
  seed: [1, 2]
exclude:
  - {density: 0.05, pipeline: dense}
`, acc, accuracyAndTraffic)
	md, err := Report(s, cells)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| density-0.05_pipeline-pertensor |  | 2, 0 | no group density=0.05,pipeline=dense | | | |",
		"| density-0.01_pipeline-pertensor |  | 2, 0 | the group itself | | | |",
		"| density-0.05_pipeline-pertensor | density-0.01_pipeline-pertensor | 2, 2 | +1.00 [",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestBadPairs(t *testing.T) {
	const matrix = "matrix:\n  density: [0.01, 0.05]\n  pipeline: [dense, ssfusion]\n  seed: [1, 2]\n"
	for _, tc := range []struct{ name, pairs, want string }{
		{"not a list", "{group: {pipeline: ssfusion}}", "want a list"},
		{"unknown key", "[{group: {pipeline: ssfusion}, versus: {pipeline: dense}}]", `unknown key "versus"`},
		{"no against", "[{group: {pipeline: ssfusion}}]", "name both"},
		{"axis not in the matrix", "[{group: {model: vgg16}, against: {pipeline: dense}}]", "model is not an axis"},
		{"seed", "[{group: {seed: 1}, against: {seed: 2}}]", "seed is not an axis"},
		{"value not on its axis", "[{group: {pipeline: ssfusion}, against: {pipeline: pertensor}}]", "has no value pertensor"},
		{"itself", "[{group: {pipeline: ssfusion}, against: {pipeline: ssfusion}}]", "against itself"},
		{"not a mapping", "[{group: ssfusion, against: dense}]", "want {group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("compare: {reference: dense, margin: 0.5, pairs: " + tc.pairs + "}\n" + matrix))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pairs") && !strings.Contains(err.Error(), "pair ") {
				t.Errorf("error %v, want one naming the pairs and %q", err, tc.want)
			}
		})
	}
}
