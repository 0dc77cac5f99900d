package nets

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// hashSpecs are the models whose initial parameters are compared across processes.
var hashSpecs = []Spec{
	{Arch: "resnet20", BatchSize: 2, Seed: 42, Channels: 3, Height: 32, Width: 32, Classes: 10},
	{Arch: "vgg11", BatchSize: 2, Seed: 42, Channels: 3, Height: 32, Width: 32, Classes: 10, WidthMult: 0.5},
	{Arch: "resnet18", BatchSize: 2, Seed: 7, Channels: 1, Height: 28, Width: 28, Classes: 10, WidthMult: 0.25},
	{Arch: "mlp", BatchSize: 2, Seed: 42, Channels: 1, Height: 28, Width: 28, Classes: 10},
	{Arch: "lstm", BatchSize: 2, Seed: 42, Vocab: 500, SeqLen: 5, HSize: 32, Layers: 2},
}

// paramHash hashes names, shapes and the bits of every value, in order.
func paramHash(ps []Param) uint64 {
	h := fnv.New64a()
	for _, p := range ps {
		h.Write([]byte(p.Name))
		for _, d := range p.Shape {
			binary.Write(h, binary.LittleEndian, int64(d))
		}
		for _, v := range p.Value {
			binary.Write(h, binary.LittleEndian, math.Float32bits(v))
		}
	}
	return h.Sum64()
}

// TestSameSpecSameParameters builds every spec twice and compares the parameters bitwise; a
// different seed must change them.
func TestSameSpecSameParameters(t *testing.T) {
	for _, s := range hashSpecs {
		a, b := mustNew(t, s), mustNew(t, s)
		if len(a.params) != len(b.params) {
			t.Fatalf("%s: %d and %d parameters", s.Arch, len(a.params), len(b.params))
		}
		for i, p := range a.params {
			q := b.params[i]
			if p.Name != q.Name || !slices.Equal(p.Shape, q.Shape) || !slices.EqualFunc(p.Value, q.Value, func(x, y float32) bool {
				return math.Float32bits(x) == math.Float32bits(y)
			}) {
				t.Errorf("%s: parameter %d (%s) differs between two builds", s.Arch, i, p.Name)
			}
		}
		s.Seed++
		if c := mustNew(t, s); paramHash(c.params) == paramHash(a.params) {
			t.Errorf("%s: seeds %d and %d give the same parameters", s.Arch, s.Seed-1, s.Seed)
		}
	}
}

const hashChildEnv = "NETS_PARAM_HASH_CHILD"

// TestParamHashAcrossProcesses re-executes the test binary and compares the parameter hashes the
// child prints with the parent's.
func TestParamHashAcrossProcesses(t *testing.T) {
	if os.Getenv(hashChildEnv) != "" {
		for _, s := range hashSpecs {
			fmt.Printf("paramhash %s %016x\n", s.Arch, paramHash(mustNew(t, s).params))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestParamHashAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), hashChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	child := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "paramhash" {
			child[f[1]] = f[2]
		}
	}
	for _, s := range hashSpecs {
		want := fmt.Sprintf("%016x", paramHash(mustNew(t, s).params))
		if got, ok := child[s.Arch]; !ok {
			t.Errorf("%s: child printed no hash\n%s", s.Arch, out)
		} else if got != want {
			t.Errorf("%s: child's parameter hash %s, parent's %s", s.Arch, got, want)
		}
	}
}
