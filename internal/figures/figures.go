// Package figures keeps the figures that the documentation quotes equal to the result files
// they come from. A quoted figure is marked in the Markdown with the expression that computes
// it and the format that prints it:
//
//	SSFusion reached <!-- fig %.2f: csv("results/convergence/comparison.csv", "task-mnist_sparsity-d0.01_pipeline-ssfusion", "mean") -->98.03<!-- /fig -->%
//
// The marks are HTML comments, so the rendered page shows the figure alone. Update rewrites
// every figure from its expression; Check reports those that differ. An expression is
// arithmetic (github.com/expr-lang/expr) over these functions, with paths relative to the
// repository's root:
//
//   - csv(path, row, column): the cell of a CSV file whose first column is row, under the
//     header column; a number when it reads as one, else the text.
//   - json(path, query): the value a gjson query (github.com/tidwall/gjson) selects in a JSON
//     file, such as "throughput.samples_per_s" or "points.#(pipeline==\"dense\").samples_per_s".
//     A query that selects an array of numbers, such as "steps.@values.#.seconds", gives a
//     list, which expr's builtins reduce: sum(...), max(...), len(...).
//   - cell(path, column, key, value, ...): the cell under column in the one row of a CSV file
//     whose key columns hold the values given, for files whose first column names no row
//     alone: cell("results/maps/m/gains.csv", "gain_over_best", "setting", "A").
//   - rows(path, key, value, ...): how many rows of a CSV file hold the values given under
//     the key columns: rows("results/maps/m/gains.csv", "setting", "", "verdict", "loses").
//   - series(path, key, from, to, column): the numbers under column of a CSV file in the rows
//     whose key column lies between from and to, both included, skipping rows where column
//     is empty: mean(series("results/exdyna/cell/metrics.csv", "step", 2500, 2999,
//     "density_achieved")) is the mean density of a run's last 500 steps.
//
// A format is a fmt verb for the value: %.2f, %+.1f, %.0f for numbers, %s for text, %d for a
// whole number.
package figures

import (
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/tidwall/gjson"
)

// mark is a quoted figure: the format and expression in its opening comment, and the text
// between the comments.
var mark = regexp.MustCompile(`<!-- fig (%[-+ #0]*[0-9]*(?:\.[0-9]+)?[a-z]): (.+?) -->(.*?)<!-- /fig -->`)

// A Figure is one marked figure of a file.
type Figure struct {
	File   string // as given to Update or Check
	Line   int
	Expr   string
	Quoted string // what the file says
	Value  string // what the expression gives, formatted; "" when it failed
	Err    error
}

func (f Figure) String() string {
	if f.Err != nil {
		return fmt.Sprintf("%s:%d: %s: %v", f.File, f.Line, f.Expr, f.Err)
	}
	return fmt.Sprintf("%s:%d: quotes %q where %s gives %q", f.File, f.Line, f.Quoted, f.Expr, f.Value)
}

// Sources reads the result files expressions name, each once, from root.
type Sources struct {
	root  string
	mu    sync.Mutex
	csvs  map[string][][]string
	jsons map[string]string
}

// NewSources reads files under root, the repository's root.
func NewSources(root string) *Sources {
	return &Sources{root: root, csvs: map[string][][]string{}, jsons: map[string]string{}}
}

// Check returns the marked figures of the file at path (relative to the sources' root) that
// differ from what their expressions give, or whose expressions fail.
func (s *Sources) Check(path string) ([]Figure, error) {
	figs, _, err := s.evaluate(path)
	if err != nil {
		return nil, err
	}
	var bad []Figure
	for _, f := range figs {
		if f.Err != nil || f.Value != f.Quoted {
			bad = append(bad, f)
		}
	}
	return bad, nil
}

// Update rewrites every marked figure of the file at path from its expression, and returns
// the figures it changed. A failing expression leaves the file as it was and is an error.
func (s *Sources) Update(path string) ([]Figure, error) {
	figs, text, err := s.evaluate(path)
	if err != nil {
		return nil, err
	}
	var failed []error
	var changed []Figure
	for _, f := range figs {
		if f.Err != nil {
			failed = append(failed, errors.New(f.String()))
		} else if f.Value != f.Quoted {
			changed = append(changed, f)
		}
	}
	if len(failed) > 0 {
		return nil, errors.Join(failed...)
	}
	if len(changed) == 0 {
		return nil, nil
	}
	i := 0
	out := mark.ReplaceAllStringFunc(text, func(m string) string {
		sub := mark.FindStringSubmatch(m)
		v := figs[i].Value
		i++
		return "<!-- fig " + sub[1] + ": " + sub[2] + " -->" + v + "<!-- /fig -->"
	})
	full := filepath.Join(s.root, path)
	tmp := full + ".tmp"
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return nil, err
	}
	return changed, os.Rename(tmp, full)
}

// evaluate reads the file and computes every marked figure.
func (s *Sources) evaluate(path string) ([]Figure, string, error) {
	raw, err := os.ReadFile(filepath.Join(s.root, path))
	if err != nil {
		return nil, "", err
	}
	text := string(raw)
	var figs []Figure
	for _, loc := range mark.FindAllStringSubmatchIndex(text, -1) {
		format, src, quoted := text[loc[2]:loc[3]], text[loc[4]:loc[5]], text[loc[6]:loc[7]]
		f := Figure{File: path, Line: 1 + strings.Count(text[:loc[0]], "\n"), Expr: src, Quoted: quoted}
		f.Value, f.Err = s.value(format, src)
		figs = append(figs, f)
	}
	return figs, text, nil
}

// value computes an expression and formats its result.
func (s *Sources) value(format, src string) (string, error) {
	env := map[string]any{
		"csv":    s.csv,
		"json":   s.json,
		"series": s.series,
		"cell":   s.cell,
		"rows":   s.rows,
	}
	prog, err := expr.Compile(src, expr.Env(env))
	if err != nil {
		return "", err
	}
	v, err := expr.Run(prog, env)
	if err != nil {
		return "", err
	}
	return formatValue(format, v)
}

// formatValue prints v by format; a number is printed by a number's verbs, a whole number
// by %d, text by %s.
func formatValue(format string, v any) (string, error) {
	verb := format[len(format)-1]
	switch x := v.(type) {
	case string:
		if verb != 's' {
			return "", fmt.Errorf("the value %q is text, which %s does not print", x, format)
		}
		return fmt.Sprintf(format, x), nil
	case int:
		v = float64(x)
	}
	f, ok := v.(float64)
	if !ok {
		return "", fmt.Errorf("the value %v (%T) is neither a number nor text", v, v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("the value is %v", f)
	}
	switch verb {
	case 'd':
		if f != math.Trunc(f) {
			return "", fmt.Errorf("%s prints whole numbers, the value is %v", format, f)
		}
		return fmt.Sprintf(format, int64(f)), nil
	case 'f', 'e', 'g':
		s := fmt.Sprintf(format, f)
		// A rounded zero keeps no sign: "-0.0" would claim a direction the value lacks.
		if z, err := strconv.ParseFloat(s, 64); err == nil && z == 0 {
			s = strings.Replace(strings.Replace(s, "-", "", 1), "+", "", 1)
		}
		return s, nil
	}
	return "", fmt.Errorf("%s does not print a number", format)
}

// csv returns the cell of the CSV file at path in the row whose first column is row, under
// the header column.
func (s *Sources) csv(path, row, column string) (any, error) {
	records, err := s.readCSV(path)
	if err != nil {
		return nil, err
	}
	col, err := columnOf(path, records[0], column)
	if err != nil {
		return nil, err
	}
	for _, r := range records[1:] {
		if len(r) > 0 && r[0] == row {
			if col >= len(r) {
				return nil, fmt.Errorf("%s, row %q, has no field %d", path, row, col+1)
			}
			return cellValue(r[col]), nil
		}
	}
	return nil, fmt.Errorf("%s has no row %q", path, row)
}

// cell returns the cell under column in the one row of the CSV file at path whose columns
// named in keys (name, value, name, value, ...) hold those values.
func (s *Sources) cell(path, column string, keys ...string) (any, error) {
	records, matched, err := s.matching(path, keys)
	if err != nil {
		return nil, err
	}
	col, err := columnOf(path, records[0], column)
	if err != nil {
		return nil, err
	}
	if len(matched) != 1 {
		return nil, fmt.Errorf("%s has %d rows with %s, want one", path, len(matched), describeKeys(keys))
	}
	r := matched[0]
	if col >= len(r) {
		return nil, fmt.Errorf("%s, row with %s, has no field %d", path, describeKeys(keys), col+1)
	}
	return cellValue(r[col]), nil
}

// rows returns how many rows of the CSV file at path hold, under the columns named in keys
// (name, value, name, value, ...), those values.
func (s *Sources) rows(path string, keys ...string) (float64, error) {
	_, matched, err := s.matching(path, keys)
	return float64(len(matched)), err
}

// matching returns the CSV file's records and those of its rows whose key columns hold the
// values keys pairs with them.
func (s *Sources) matching(path string, keys []string) (records, matched [][]string, err error) {
	if len(keys) == 0 || len(keys)%2 != 0 {
		return nil, nil, fmt.Errorf("%s: keys come in pairs of a column and a value, got %q", path, keys)
	}
	if records, err = s.readCSV(path); err != nil {
		return nil, nil, err
	}
	cols := make([]int, len(keys)/2)
	for i := range cols {
		if cols[i], err = columnOf(path, records[0], keys[2*i]); err != nil {
			return nil, nil, err
		}
	}
	for _, r := range records[1:] {
		ok := true
		for i, c := range cols {
			ok = ok && c < len(r) && r[c] == keys[2*i+1]
		}
		if ok {
			matched = append(matched, r)
		}
	}
	return records, matched, nil
}

func describeKeys(keys []string) string {
	var parts []string
	for i := 0; i+1 < len(keys); i += 2 {
		parts = append(parts, fmt.Sprintf("%s %q", keys[i], keys[i+1]))
	}
	return strings.Join(parts, " and ")
}

// series returns the numbers under column in the rows of the CSV file at path whose key
// column holds a number from from to to, skipping the rows where column is empty (a metrics
// file's evaluation rows, say). No row, or a cell that is not a number, is an error: a mean
// of nothing would print as a figure.
func (s *Sources) series(path, key string, fromBound, toBound any, column string) ([]any, error) {
	from, err := number(fromBound)
	if err != nil {
		return nil, fmt.Errorf("series' lower bound: %w", err)
	}
	to, err := number(toBound)
	if err != nil {
		return nil, fmt.Errorf("series' upper bound: %w", err)
	}
	records, err := s.readCSV(path)
	if err != nil {
		return nil, err
	}
	k, err := columnOf(path, records[0], key)
	if err != nil {
		return nil, err
	}
	c, err := columnOf(path, records[0], column)
	if err != nil {
		return nil, err
	}
	var list []any
	for n, r := range records[1:] {
		if max(k, c) >= len(r) || r[c] == "" {
			continue
		}
		kv, err := strconv.ParseFloat(r[k], 64)
		if err != nil || kv < from || kv > to {
			continue
		}
		v, err := strconv.ParseFloat(r[c], 64)
		if err != nil {
			return nil, fmt.Errorf("%s, line %d: %s is %q, not a number", path, n+2, column, r[c])
		}
		list = append(list, v)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s has no %s in rows with %s from %v to %v", path, column, key, from, to)
	}
	return list, nil
}

// number is an expression's whole or decimal number as a float64.
func number(v any) (float64, error) {
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

// columnOf is the index of the column name in a CSV file's header, or an error naming the
// columns the file has.
func columnOf(path string, header []string, name string) (int, error) {
	if i := slices.Index(header, name); i >= 0 {
		return i, nil
	}
	return -1, fmt.Errorf("%s has no column %q (it has %s)", path, name, strings.Join(header, ", "))
}

// cellValue is a CSV cell as an expression sees it: a number when it reads as one, else
// the text.
func cellValue(field string) any {
	if f, err := strconv.ParseFloat(field, 64); err == nil {
		return f
	}
	return field
}

func (s *Sources) readCSV(path string) ([][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.csvs[path]; ok {
		return r, nil
	}
	f, err := os.Open(filepath.Join(s.root, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	s.csvs[path] = records
	return records, nil
}

// json returns what query selects in the JSON file at path: a number, text, or a list of
// numbers.
func (s *Sources) json(path, query string) (any, error) {
	s.mu.Lock()
	doc, ok := s.jsons[path]
	s.mu.Unlock()
	if !ok {
		raw, err := os.ReadFile(filepath.Join(s.root, path))
		if err != nil {
			return nil, err
		}
		if !gjson.ValidBytes(raw) {
			return nil, fmt.Errorf("%s is not valid JSON", path)
		}
		doc = string(raw)
		s.mu.Lock()
		s.jsons[path] = doc
		s.mu.Unlock()
	}
	r := gjson.Get(doc, query)
	switch r.Type {
	case gjson.Number:
		return r.Num, nil
	case gjson.String:
		return r.Str, nil
	case gjson.True, gjson.False:
		return strconv.FormatBool(r.Bool()), nil
	}
	if r.IsArray() {
		return numbers(path, query, r.Array())
	}
	return nil, fmt.Errorf("%s has no value at %q", path, query)
}

// numbers is an array's elements as a list that expr's builtins take; an element that is
// not a number would make a sum or a maximum mean something else, so it is an error.
func numbers(path, query string, elems []gjson.Result) ([]any, error) {
	list := make([]any, len(elems))
	for i, e := range elems {
		if e.Type != gjson.Number {
			return nil, fmt.Errorf("%s at %q: element %d is %s, not a number", path, query, i, e.Raw)
		}
		list[i] = e.Num
	}
	return list, nil
}
