package experiments

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
)

// Cost is what running an experiment took on the machine that ran it: how many cells, and
// their training wall-clock (each summary's wall_s) summed. Set-up, evaluation at the end
// and plotting come on top, a few seconds a cell.
type Cost struct {
	Cells   int
	Seconds float64
}

// MeasuredCost reads the cost of the experiment whose results are in dir: the summary.json
// of every cell folder directly under it. A folder without cells is an error.
func MeasuredCost(dir string) (Cost, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "summary.json"))
	if err != nil {
		return Cost{}, fmt.Errorf("listing the cells of %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return Cost{}, fmt.Errorf("%s holds no cell with a summary.json", dir)
	}
	slices.Sort(paths)
	var c Cost
	for _, p := range paths {
		s, err := readSummary(filepath.Dir(p))
		if err != nil {
			return Cost{}, err
		}
		c.Cells++
		c.Seconds += s.WallSeconds
	}
	return c, nil
}

// String says the cost in words, as experiment files and reports quote it: "6 cells, 3
// minutes of training in all".
func (c Cost) String() string {
	noun := "cells"
	if c.Cells == 1 {
		noun = "cell"
	}
	return fmt.Sprintf("%d %s, %s of training in all", c.Cells, noun, durationWords(c.Seconds))
}

// durationWords rounds seconds to what a person would plan around: minutes up to two
// hours, hours to a tenth beyond.
func durationWords(s float64) string {
	m := math.Round(s / 60)
	switch {
	case s < 60:
		return "under a minute"
	case m == 1:
		return "1 minute"
	case m < 120:
		return fmt.Sprintf("%.0f minutes", m)
	}
	return fmt.Sprintf("%.1f hours", s/3600)
}
