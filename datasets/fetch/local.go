package fetch

import (
	"os"
	"path/filepath"
	"strings"
)

// Presence is how much of a data set a folder holds.
type Presence int

const (
	Absent   Presence = iota // no folder
	Partial                  // a folder, with files missing, damaged or not unpacked
	Complete                 // every file, with its pinned checksum, unpacked
)

// String answers whether the data set is here: no, partly or yes.
func (p Presence) String() string { return [...]string{"no", "partly", "yes"}[p] }

// PresenceIn reports how much of d dir holds, checking every file as Verify does.
func (d Dataset) PresenceIn(dir string) Presence {
	if len(Verify(d, dir)) == 0 {
		return Complete
	}
	if _, err := os.Stat(dir); err == nil {
		return Partial
	}
	return Absent
}

// Host is the host that serves d's first file from its first mirror.
func (d Dataset) Host() string { return host(d.Files[0].URLs[0]) }

// host is the host of an http or https URL.
func host(url string) string {
	rest, _ := strings.CutPrefix(url, "https://")
	rest, _ = strings.CutPrefix(rest, "http://")
	h, _, _ := strings.Cut(rest, "/")
	return h
}

// LookupAll returns the data sets of the catalog called names, in their order; an unknown
// name is an error, as Lookup gives it.
func LookupAll(names []string) ([]Dataset, error) {
	var sets []Dataset
	for _, n := range names {
		d, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		sets = append(sets, d)
	}
	return sets, nil
}

// Fetched lists the data sets of the catalog that have a folder under root, whole or not.
func Fetched(root string) []Dataset {
	var sets []Dataset
	for _, d := range Catalog() {
		if _, err := os.Stat(filepath.Join(root, d.Name)); err == nil {
			sets = append(sets, d)
		}
	}
	return sets
}
