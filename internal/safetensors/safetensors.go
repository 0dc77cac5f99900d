// Package safetensors writes float32 tensors in the safetensors format, which PyTorch
// (safetensors.torch.load_file), JAX and NumPy read: an 8-byte little-endian length, a
// JSON header naming each tensor's dtype, shape and byte range, then the data.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/ssfusion/ssfusion/internal/atomicfile"
)

// Tensor is one named float32 tensor, its values in row-major order.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// entry is a tensor's line in the header.
type entry struct {
	DType       string `json:"dtype"`
	Shape       []int  `json:"shape"`
	DataOffsets [2]int `json:"data_offsets"`
}

// Encode renders tensors, with metadata (string to string, may be nil), as a safetensors
// file. Names must be unique and not "__metadata__", and each shape must hold its data.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	offset := 0
	for _, t := range tensors {
		if _, dup := header[t.Name]; dup || t.Name == "" || t.Name == "__metadata__" {
			return nil, fmt.Errorf("safetensors: tensor name %q is empty, reserved or given twice", t.Name)
		}
		n := 1
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %s has shape %v", t.Name, t.Shape)
			}
			n *= d
		}
		if n != len(t.Data) {
			return nil, fmt.Errorf("safetensors: tensor %s has shape %v (%d elements) but %d values", t.Name, t.Shape, n, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = entry{DType: "F32", Shape: shape, DataOffsets: [2]int{offset, offset + 4*n}}
		offset += 4 * n
	}
	js, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("safetensors: encoding the header: %w", err)
	}
	// The format lets the header end in spaces; they align the data to 8 bytes.
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	out := make([]byte, 8, 8+len(js)+offset)
	binary.LittleEndian.PutUint64(out, uint64(len(js)))
	out = append(out, js...)
	for _, t := range tensors {
		for _, v := range t.Data {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out, nil
}

// Write writes tensors and metadata to path as a safetensors file, atomically.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	data, err := Encode(tensors, metadata)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}
