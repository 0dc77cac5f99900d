package tensorboard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// records splits an event file into its records, checking each length and data CRC as
// TensorFlow's reader does (masked CRC-32C, written out here from the format's definition).
func records(data []byte) ([][]byte, error) {
	mask := func(b []byte) uint32 {
		c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 12 {
			return nil, fmt.Errorf("%d bytes left, short of a record header", len(data))
		}
		n := binary.LittleEndian.Uint64(data)
		if got := binary.LittleEndian.Uint32(data[8:]); got != mask(data[:8]) {
			return nil, fmt.Errorf("length CRC %08x, want %08x", got, mask(data[:8]))
		}
		if uint64(len(data)) < 12+n+4 {
			return nil, fmt.Errorf("record of %d bytes in %d", n, len(data))
		}
		body := data[12 : 12+n]
		if got := binary.LittleEndian.Uint32(data[12+n:]); got != mask(body) {
			return nil, fmt.Errorf("data CRC %08x, want %08x", got, mask(body))
		}
		out = append(out, body)
		data = data[12+n+4:]
	}
	return out, nil
}

// event is what the test reads of an Event message.
type event struct {
	wall    float64
	step    int64
	version string
	scalars map[string]float32
}

func decode(t *testing.T, b []byte) event {
	t.Helper()
	ev := event{scalars: map[string]float32{}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("bad tag")
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			ev.wall, b = math.Float64frombits(v), b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			ev.step, b = int64(v), b[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeString(b)
			ev.version, b = v, b[n:]
		case num == 5 && typ == protowire.BytesType:
			summary, n := protowire.ConsumeBytes(b)
			b = b[n:]
			for len(summary) > 0 {
				_, _, n := protowire.ConsumeTag(summary)
				value, m := protowire.ConsumeBytes(summary[n:])
				summary = summary[n+m:]
				var tag string
				var x float32
				for len(value) > 0 {
					num, _, n := protowire.ConsumeTag(value)
					value = value[n:]
					if num == 1 {
						s, n := protowire.ConsumeString(value)
						tag, value = s, value[n:]
					} else {
						v, n := protowire.ConsumeFixed32(value)
						x, value = math.Float32frombits(v), value[n:]
					}
				}
				ev.scalars[tag] = x
			}
		default:
			t.Fatalf("unexpected field %d of type %d", num, typ)
		}
	}
	return ev
}

func TestEventFile(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 500_000_000)
	if err := w.Scalars(10, at, map[string]float64{"loss": 2.5, "lr": 0.1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(20, at.Add(time.Second), map[string]float64{"eval/accuracy": 0.875}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v, want one named events.out.tfevents.*", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	recs, err := records(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want the version and two scalar events", len(recs))
	}
	if v := decode(t, recs[0]); v.version != "brain.Event:2" || v.wall <= 0 {
		t.Errorf("first event %+v, want the file version", v)
	}
	first, second := decode(t, recs[1]), decode(t, recs[2])
	if first.step != 10 || first.wall != 1700000000.5 || first.scalars["loss"] != 2.5 || first.scalars["lr"] != float32(0.1) {
		t.Errorf("first scalars %+v", first)
	}
	if second.step != 20 || second.scalars["eval/accuracy"] != 0.875 || len(second.scalars) != 1 {
		t.Errorf("second scalars %+v", second)
	}
	// A corrupted byte is caught by the reader's CRC check.
	bad := []byte(strings.Clone(string(data)))
	bad[len(bad)-6] ^= 1
	if _, err := records(bad); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("a corrupted record read as %v, want a CRC error", err)
	}
}
