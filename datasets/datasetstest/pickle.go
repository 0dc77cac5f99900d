// Package datasetstest writes small data sets in the layouts users download, for tests of
// the readers and of training on them. Its pickles are written opcode by opcode the way
// Python 2's cPickle wrote the published CIFAR batches, numpy arrays included, so that the
// readers are tested against that byte stream without Python.
package datasetstest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// Pickle opcodes of protocol 2 used by the published CIFAR batches.
const (
	opProto          = 0x80
	opEmptyDict      = '}'
	opMark           = '('
	opShortBinString = 'U'
	opBinString      = 'T'
	opGlobal         = 'c'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opBinInt         = 'J'
	opTuple          = 't'
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opReduce         = 'R'
	opBuild          = 'b'
	opNewFalse       = 0x89
	opNone           = 'N'
	opEmptyList      = ']'
	opAppends        = 'e'
	opSetItems       = 'u'
	opStop           = '.'
)

// Pickler appends pickle opcodes to a buffer.
type Pickler struct{ B []byte }

func (p *Pickler) op(code byte) *Pickler { p.B = append(p.B, code); return p }

// Str pushes a Python 2 str.
func (p *Pickler) Str(s string) *Pickler {
	if len(s) < 256 {
		p.B = append(append(p.B, opShortBinString, byte(len(s))), s...)
		return p
	}
	p.B = binary.LittleEndian.AppendUint32(append(p.B, opBinString), uint32(len(s)))
	p.B = append(p.B, s...)
	return p
}

// Int pushes an int in the smallest encoding, as cPickle does.
func (p *Pickler) Int(n int) *Pickler {
	switch {
	case n >= 0 && n < 1<<8:
		p.B = append(p.B, opBinInt1, byte(n))
	case n >= 0 && n < 1<<16:
		p.B = binary.LittleEndian.AppendUint16(append(p.B, opBinInt2), uint16(n))
	default:
		p.B = binary.LittleEndian.AppendUint32(append(p.B, opBinInt), uint32(int32(n)))
	}
	return p
}

// Global pushes module.name.
func (p *Pickler) Global(module, name string) *Pickler {
	p.B = append(p.B, opGlobal)
	p.B = append(p.B, module+"\n"+name+"\n"...)
	return p
}

// NumpyUint8 pushes a C-ordered numpy uint8 array of the given shape, as ndarray.__reduce__
// describes it: _reconstruct(ndarray, (0,), 'b'), then its state set by BUILD.
func (p *Pickler) NumpyUint8(shape []int, data []byte) *Pickler {
	p.Global("numpy.core.multiarray", "_reconstruct").Global("numpy", "ndarray").
		Int(0).op(opTuple1).Str("b").op(opTuple3).op(opReduce)
	p.op(opMark).Int(1).op(opMark)
	for _, d := range shape {
		p.Int(d)
	}
	p.op(opTuple)
	// dtype('u1'): dtype('u1', 0, 1) with state (3, '|', None, None, None, -1, -1, 0).
	p.Global("numpy", "dtype").Str("u1").Int(0).Int(1).op(opTuple3).op(opReduce)
	p.op(opMark).Int(3).Str("|").op(opNone).op(opNone).op(opNone).Int(-1).Int(-1).Int(0).op(opTuple).op(opBuild)
	p.op(opNewFalse).Str(string(data)).op(opTuple).op(opBuild)
	return p
}

// IntList pushes a list of ints.
func (p *Pickler) IntList(xs []int) *Pickler {
	p.op(opEmptyList).op(opMark)
	for _, x := range xs {
		p.Int(x)
	}
	return p.op(opAppends)
}

// CIFARBatch is a pickled batch of the python version of CIFAR: a dict with the images in
// "data" and the labels under labelKey ("labels" for CIFAR-10, "fine_labels" for CIFAR-100).
func CIFARBatch(labelKey string, labels []int, pixels []byte) []byte {
	p := &Pickler{B: []byte{opProto, 2}}
	p.op(opEmptyDict).op(opMark)
	p.Str("data").NumpyUint8([]int{len(labels), len(pixels) / max(len(labels), 1)}, pixels)
	p.Str(labelKey).IntList(labels)
	p.Str("batch_label").Str("training batch 1 of 5")
	p.op(opSetItems).op(opStop)
	return p.B
}

// Images makes n CIFAR-sized images with labels in 0..classes-1, deterministic in seed, in
// which each class has its own mean brightness so that a model can learn them.
func Images(n, classes, seed int) (labels []int, pixels []byte) {
	const size = 3 * 32 * 32
	x := uint32(seed)*2654435761 + 1
	for i := range n {
		l := (i*7 + seed) % classes
		labels = append(labels, l)
		for range size {
			x = x*1664525 + 1013904223
			pixels = append(pixels, byte(l*(200/classes)+int(x>>27)))
		}
	}
	return labels, pixels
}

// CIFAR10Python writes dir/cifar-10-batches-py/ as torchvision's download leaves it, with
// perBatch images in each of the five training batches and the test batch.
func CIFAR10Python(dir string, perBatch int) error {
	root := filepath.Join(dir, "cifar-10-batches-py")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	names := []string{"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"}
	for i, name := range names {
		labels, pixels := Images(perBatch, 10, i)
		if err := os.WriteFile(filepath.Join(root, name), CIFARBatch("labels", labels, pixels), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
