package nets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// TrainState encodes what TrainStep carries from one call to the next besides parameters and
// buffers: the position of the dropout stream and the hidden state an LSTM hands to the next
// batch. Restored with SetTrainState into a model of the same Spec, it makes the following
// steps bit-identical to those of the model it was taken from.
func (n *net) TrainState() ([]byte, error) {
	rngState, err := n.dropRNG.src.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encoding the dropout stream: %w", err)
	}
	var buf bytes.Buffer
	writeBlock(&buf, rngState)
	for _, l := range n.train.lstms {
		writeFloats(&buf, l.h0)
		writeFloats(&buf, l.c0)
	}
	return buf.Bytes(), nil
}

// SetTrainState restores what TrainState returned. A state taken from a model of another
// shape is an error and leaves the model as it was.
func (n *net) SetTrainState(state []byte) error {
	r := bytes.NewReader(state)
	rngState, err := readBlock(r)
	if err != nil {
		return fmt.Errorf("training state: dropout stream: %w", err)
	}
	carried := make([][]float32, 0, 2*len(n.train.lstms))
	for i, l := range n.train.lstms {
		for _, want := range [][]float32{l.h0, l.c0} {
			v, err := readFloats(r, len(want))
			if err != nil {
				return fmt.Errorf("training state: LSTM layer %d: %w", i, err)
			}
			carried = append(carried, v)
		}
	}
	if r.Len() != 0 {
		return fmt.Errorf("training state: %d bytes left over: it belongs to another model", r.Len())
	}
	src := *n.dropRNG.src
	if err := src.UnmarshalBinary(rngState); err != nil {
		return fmt.Errorf("training state: dropout stream: %w", err)
	}
	*n.dropRNG.src = src
	for i, l := range n.train.lstms {
		copy(l.h0, carried[2*i])
		copy(l.c0, carried[2*i+1])
	}
	return nil
}

func writeBlock(w *bytes.Buffer, b []byte) {
	_ = binary.Write(w, binary.LittleEndian, uint32(len(b)))
	w.Write(b)
}

func writeFloats(w *bytes.Buffer, v []float32) {
	_ = binary.Write(w, binary.LittleEndian, uint32(len(v)))
	for _, x := range v {
		_ = binary.Write(w, binary.LittleEndian, math.Float32bits(x))
	}
}

func readBlock(r *bytes.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, truncated(err)
	}
	if int64(n) > int64(r.Len()) {
		return nil, fmt.Errorf("block of %d bytes, only %d left", n, r.Len())
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, truncated(err)
}

func readFloats(r *bytes.Reader, want int) ([]float32, error) {
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, truncated(err)
	}
	if int(n) != want {
		return nil, fmt.Errorf("%d values, the model has %d", n, want)
	}
	if int64(n)*4 > int64(r.Len()) {
		return nil, fmt.Errorf("%d values announced, only %d bytes left", n, r.Len())
	}
	v := make([]float32, n)
	for i := range v {
		var bits uint32
		if err := binary.Read(r, binary.LittleEndian, &bits); err != nil {
			return nil, truncated(err)
		}
		v[i] = math.Float32frombits(bits)
	}
	return v, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated")
	}
	return err
}
