// Package tensorboard writes scalars as TensorBoard event files: a sequence of records, each
// a length, its masked CRC-32C, an Event protocol buffer and the data's masked CRC-32C, the
// layout TensorFlow's record writer uses and TensorBoard reads.
package tensorboard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Writer appends events to one file.
type Writer struct {
	f   *os.File
	rec []byte
}

// castagnoli is the CRC-32C table the record format checksums with.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Create starts an event file in dir, named as TensorBoard expects
// (events.out.tfevents.<seconds>.<host>), with the version event first.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, _ := os.Hostname()
	now := time.Now()
	name := fmt.Sprintf("events.out.tfevents.%d.%s", now.Unix(), host)
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f}
	// Event.wall_time (1, double), Event.file_version (3, string).
	ev := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(now)))
	ev = protowire.AppendTag(ev, 3, protowire.BytesType)
	ev = protowire.AppendString(ev, "brain.Event:2")
	if err := w.write(ev); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Scalars records the values of step, by tag, at time at: one Event whose Summary holds a
// Value per tag, in tag order. A NaN or infinite value is written as it is; TensorBoard
// shows it as such.
func (w *Writer) Scalars(step int64, at time.Time, values map[string]float64) error {
	tags := make([]string, 0, len(values))
	for tag := range values {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	var summary []byte
	for _, tag := range tags {
		// Summary.Value: tag (1, string), simple_value (2, float).
		var v []byte
		v = protowire.AppendTag(v, 1, protowire.BytesType)
		v = protowire.AppendString(v, tag)
		v = protowire.AppendTag(v, 2, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[tag])))
		// Summary.value (1, repeated message).
		summary = protowire.AppendTag(summary, 1, protowire.BytesType)
		summary = protowire.AppendBytes(summary, v)
	}
	// Event: wall_time (1, double), step (2, int64), summary (5, message).
	ev := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(at)))
	ev = protowire.AppendTag(ev, 2, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return w.write(ev)
}

// write appends one record: length, masked CRC of the length, data, masked CRC of the
// data, in one write so that a reader never sees half a record's header.
func (w *Writer) write(data []byte) error {
	w.rec = binary.LittleEndian.AppendUint64(w.rec[:0], uint64(len(data)))
	w.rec = binary.LittleEndian.AppendUint32(w.rec, maskedCRC(w.rec[:8]))
	w.rec = append(w.rec, data...)
	w.rec = binary.LittleEndian.AppendUint32(w.rec, maskedCRC(data))
	if _, err := w.f.Write(w.rec); err != nil {
		return fmt.Errorf("tensorboard: writing %s: %w", w.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// maskedCRC is the record format's checksum: CRC-32C, rotated and offset so that a CRC of
// data holding CRCs does not degenerate.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
