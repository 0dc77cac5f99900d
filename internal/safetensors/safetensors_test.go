package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readBack is an independent reader of the format, as the safetensors specification has
// it: an 8-byte little-endian header length, the JSON header, the data.
func readBack(t *testing.T, data []byte) (map[string][]float32, map[string][]int, map[string]string) {
	t.Helper()
	if len(data) < 8 {
		t.Fatalf("%d bytes, no header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if 8+n > uint64(len(data)) || (8+n)%8 != 0 {
		t.Fatalf("header of %d bytes in a file of %d, data not 8-byte aligned", n, len(data))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		t.Fatalf("header: %v", err)
	}
	body := data[8+n:]
	values, shapes := map[string][]float32{}, map[string][]int{}
	var meta map[string]string
	covered := 0
	for name, raw := range header {
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var e struct {
			DType       string `json:"dtype"`
			Shape       []int  `json:"shape"`
			DataOffsets []int  `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if e.DType != "F32" || begin > end || end > len(body) || (end-begin)%4 != 0 {
			t.Fatalf("%s: %+v in a body of %d bytes", name, e, len(body))
		}
		for b := body[begin:end]; len(b) > 0; b = b[4:] {
			values[name] = append(values[name], math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
		shapes[name] = e.Shape
		covered += end - begin
	}
	if covered != len(body) {
		t.Fatalf("the tensors cover %d of the body's %d bytes", covered, len(body))
	}
	return values, shapes, meta
}

func TestRoundTrip(t *testing.T) {
	tensors := []Tensor{
		{Name: "conv.weight", Shape: []int{2, 1, 2, 2}, Data: []float32{1, -2, 3.5, 4, 5, 6, 7, float32(math.Inf(-1))}},
		{Name: "bn.running_mean", Shape: []int{3}, Data: []float32{0.25, 0, -1e-30}},
		{Name: "scale", Shape: nil, Data: []float32{42}},
		{Name: "empty", Shape: []int{0, 4}, Data: nil},
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := Write(path, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	values, shapes, meta := readBack(t, data)
	if meta["format"] != "pt" || len(values)+1 != len(tensors) { // the empty tensor has no values
		t.Errorf("metadata %v, %d tensors with values", meta, len(values))
	}
	for _, tt := range tensors {
		want := tt.Shape
		if want == nil {
			want = []int{}
		}
		if !slices.Equal(shapes[tt.Name], want) {
			t.Errorf("%s: shape %v, want %v", tt.Name, shapes[tt.Name], want)
		}
		for i, v := range tt.Data {
			if math.Float32bits(values[tt.Name][i]) != math.Float32bits(v) {
				t.Errorf("%s[%d] = %g, want %g", tt.Name, i, values[tt.Name][i], v)
			}
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		tensors []Tensor
		want    string
	}{
		"shape and data disagree": {[]Tensor{{Name: "w", Shape: []int{2, 2}, Data: []float32{1}}}, "4 elements"},
		"twice the same name":     {[]Tensor{{Name: "w", Data: []float32{1}}, {Name: "w", Data: []float32{2}}}, `"w"`},
		"reserved name":           {[]Tensor{{Name: "__metadata__", Data: []float32{1}}}, "reserved"},
		"negative dimension":      {[]Tensor{{Name: "w", Shape: []int{-1}}}, "shape"},
	} {
		if _, err := Encode(tc.tensors, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %s", name, err, tc.want)
		}
	}
}
