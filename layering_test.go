package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/ssfusion/ssfusion"

// TestLayering holds every import between this module's packages to the table in
// docs/design.md (section Layering): an import the table does not allow fails the test,
// and so does a package the table leaves out.
func TestLayering(t *testing.T) {
	allowed, err := readLayering("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	imports, err := moduleImports()
	if err != nil {
		t.Fatal(err)
	}
	for _, problem := range checkLayering(allowed, imports) {
		t.Error(problem)
	}
}

// TestLayeringCatchesWrongWays: the check names an import against the table and a
// package missing from it.
func TestLayeringCatchesWrongWays(t *testing.T) {
	allowed := map[string][]string{"trainer": {"pipeline"}, "pipeline": {"dist"}, "dist": nil, "internal/...": {"internal/..."}}
	got := checkLayering(allowed, map[string][]string{
		"trainer":         {"pipeline", "ssfusion"},
		"pipeline":        {"dist"},
		"internal/atomic": {"internal/other"},
		"newpkg":          nil,
	})
	want := []string{"newpkg is not in the table", "trainer imports ssfusion"}
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("problem %q, want one saying %q", got[i], w)
		}
	}
}

// readLayering reads the table of the Layering section of path: package to the packages
// it may import.
func readLayering(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Layering"
			continue
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		allowed[pkg] = strings.Fields(strings.ReplaceAll(cells[3], "`", ""))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%s has no Layering table", path)
	}
	return allowed, nil
}

// moduleImports lists, for each package of the module (relative to it, "." for the
// root), the module's packages it imports, tests left out.
func moduleImports() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	rel := func(p string) string {
		if p == modulePath {
			return "."
		}
		return strings.TrimPrefix(p, modulePath+"/")
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		var ours []string
		for _, imp := range fields[1:] {
			if imp == modulePath || strings.HasPrefix(imp, modulePath+"/") {
				ours = append(ours, rel(imp))
			}
		}
		imports[rel(fields[0])] = ours
	}
	return imports, nil
}

// checkLayering lists the imports against allowed and the packages it lacks, sorted.
func checkLayering(allowed, imports map[string][]string) []string {
	row := func(pkg string) ([]string, bool) {
		if a, ok := allowed[pkg]; ok {
			return a, true
		}
		for pattern, a := range allowed {
			if prefix, ok := strings.CutSuffix(pattern, "/..."); ok && strings.HasPrefix(pkg, prefix+"/") {
				return a, true
			}
		}
		return nil, false
	}
	may := func(rule []string, imp string) bool {
		return slices.ContainsFunc(rule, func(r string) bool {
			prefix, wild := strings.CutSuffix(r, "/...")
			return r == "*" || r == imp || wild && strings.HasPrefix(imp, prefix+"/")
		})
	}
	var problems []string
	for pkg, imps := range imports {
		rule, ok := row(pkg)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not in the table: give it a row", pkg))
			continue
		}
		for _, imp := range imps {
			if !may(rule, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which the table does not allow (%s may import: %s)", pkg, imp, pkg, strings.Join(rule, " ")))
			}
		}
	}
	slices.Sort(problems)
	return problems
}
