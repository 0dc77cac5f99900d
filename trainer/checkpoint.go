package trainer

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ssfusion/ssfusion/nets"
	"github.com/ssfusion/ssfusion/pipeline"
)

// A checkpoint lives in <out>/checkpoint/: one file per rank and step
// (step-00000300.rank-1.gob: parameters, optimizer and pipeline state, the model's training
// state, the metrics so far) and latest.json, which rank 0 rewrites once every rank has
// written its file and which alone says which step to resume from. Files of other steps are
// removed only after latest.json has moved on, so an interruption at any point leaves one
// complete checkpoint behind.
//
// Both kinds of file carry a CRC-32C of their contents (a rank file in an 8-byte trailer,
// latest.json in its checksum field), so that a file damaged on disk is refused by name
// rather than resumed from: a flipped bit in a parameter would otherwise go unnoticed.
const (
	checkpointDir     = "checkpoint"
	checkpointLatest  = "latest.json"
	checkpointVersion = 2
)

// rankTrailer opens the trailer of a rank file, before the CRC-32C of what precedes it.
const rankTrailer = "SSFc"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// manifest is latest.json.
type manifest struct {
	Version int            `json:"version"`
	Step    int            `json:"step"`
	World   int            `json:"world"`
	Config  Config         `json:"config"`
	Changes []ConfigChange `json:"changes,omitempty"` // earlier resumptions under changed settings
	// ResultsVersion is the ResultsVersion of the build that wrote the checkpoint.
	ResultsVersion int `json:"results_version"`
	// Checksum is the CRC-32C, in hex, of the manifest encoded with Checksum empty.
	Checksum string `json:"checksum"`
}

// CheckpointManifest returns the latest.json that a checkpoint of cfg, written by world
// ranks after step, holds: what HasCheckpoint and ReadCheckpointConfig read. Tests of code
// that decides whether to resume use it to fabricate a checkpoint without training.
func CheckpointManifest(cfg Config, step, world int) ([]byte, error) {
	return manifest{Version: checkpointVersion, Step: step, World: world, Config: cfg, ResultsVersion: ResultsVersion}.encode()
}

// encode returns latest.json's bytes, checksum included.
func (m manifest) encode() ([]byte, error) {
	m.Checksum = ""
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	js = append(js, '\n')
	sum := fmt.Sprintf("%08x", crc32.Checksum(js, castagnoli))
	return bytes.Replace(js, []byte(emptyChecksum), []byte(`"checksum": "`+sum+`"`), 1), nil
}

// emptyChecksum is the checksum field of latest.json as its checksum is computed.
const emptyChecksum = `"checksum": ""`

// intact reports whether latest.json's bytes match their checksum: the CRC-32C of the
// file with the checksum's value emptied. Any damage is caught, also one that leaves the
// JSON meaning the same (a flipped letter case in a key).
func intact(data []byte, m manifest) bool {
	field := []byte(`"checksum": "` + m.Checksum + `"`)
	if m.Checksum == "" || bytes.Count(data, field) != 1 {
		return false
	}
	blank := bytes.Replace(data, field, []byte(emptyChecksum), 1)
	return fmt.Sprintf("%08x", crc32.Checksum(blank, castagnoli)) == m.Checksum
}

// sealRankFile appends the trailer to a rank file's bytes.
func sealRankFile(data []byte) []byte {
	data = append(data, rankTrailer...)
	return binary.LittleEndian.AppendUint32(data, crc32.Checksum(data[:len(data)-len(rankTrailer)], castagnoli))
}

// openRankFile checks a rank file's trailer and returns what precedes it.
func openRankFile(data []byte) ([]byte, bool) {
	n := len(data) - len(rankTrailer) - 4
	if n < 0 || string(data[n:n+len(rankTrailer)]) != rankTrailer {
		return nil, false
	}
	body := data[:n]
	return body, crc32.Checksum(body, castagnoli) == binary.LittleEndian.Uint32(data[n+len(rankTrailer):])
}

// rankCheckpoint is what one rank saves.
type rankCheckpoint struct {
	Version     int
	Step, Rank  int
	World       int
	Params      [][]float32
	Buffers     [][]float32
	Velocity    [][]float32
	ModelState  []byte
	HasPipeline bool
	Pipeline    pipeline.State
	Rows        []Row
	Stats       stepStats
	Checks      consistency
	LastEval    *Eval
	ElapsedS    float64
}

func rankFile(dir string, step, rank int) string {
	return filepath.Join(dir, checkpointDir, fmt.Sprintf("step-%08d.rank-%d.gob", step, rank))
}

// ReadCheckpointConfig returns the configuration of the run whose checkpoint is in dir, so
// that `train --resume DIR` needs no other flag.
func ReadCheckpointConfig(dir string) (Config, error) {
	m, err := readManifest(dir)
	if err != nil {
		return Config{}, err
	}
	return m.Config, nil
}

// HasCheckpoint reports whether dir holds a checkpoint to resume from.
func HasCheckpoint(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, checkpointDir, checkpointLatest))
	return err == nil
}

func readManifest(dir string) (*manifest, error) {
	path := filepath.Join(dir, checkpointDir, checkpointLatest)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no checkpoint to resume from in %s (%s is missing; a run writes one with --checkpoint-every)", dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading checkpoint %s: %w", path, err)
	}
	if m.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s has version %d, this program reads version %d", path, m.Version, checkpointVersion)
	}
	if !intact(data, m) {
		return nil, fmt.Errorf("checkpoint %s is damaged: its checksum does not match its contents (remove %s to start afresh)", path, filepath.Dir(path))
	}
	if m.Step <= 0 || m.World <= 0 {
		return nil, fmt.Errorf("checkpoint %s names step %d of %d ranks: not a checkpoint", path, m.Step, m.World)
	}
	return &m, nil
}

// maybeCheckpoint writes a checkpoint after steps that --checkpoint-every names, except the
// last (the run's outputs then say everything). The time it takes is kept out of the run's
// wall clock.
func (r *run) maybeCheckpoint(total int) error {
	every := r.cfg.CheckpointEvery
	if every <= 0 || r.step%every != 0 || r.step >= total {
		return nil
	}
	start := time.Now()
	if err := r.writeCheckpoint(); err != nil {
		return fmt.Errorf("checkpoint after step %d: %w", r.step, err)
	}
	r.start = r.start.Add(time.Since(start))
	return nil
}

func (r *run) writeCheckpoint() error {
	ck, err := r.snapshot()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(ck); err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(r.cfg.Out, checkpointDir), 0o755); err != nil {
		return fmt.Errorf("creating the checkpoint folder: %w", err)
	}
	if err := WriteFileAtomic(rankFile(r.cfg.Out, r.step, r.rank), sealRankFile(buf.Bytes())); err != nil {
		return err
	}
	if err := r.barrier("every rank wrote its checkpoint"); err != nil {
		return err
	}
	if r.rank == 0 {
		js, err := manifest{Version: checkpointVersion, Step: r.step, World: r.world, Config: *r.cfg, Changes: r.changes, ResultsVersion: ResultsVersion}.encode()
		if err != nil {
			return fmt.Errorf("encoding %s: %w", checkpointLatest, err)
		}
		if err := WriteFileAtomic(filepath.Join(r.cfg.Out, checkpointDir, checkpointLatest), js); err != nil {
			return err
		}
	}
	if err := r.barrier("rank 0 recorded the checkpoint"); err != nil {
		return err
	}
	return r.removeCheckpoints(r.step)
}

// removeCheckpoints removes this rank's checkpoint files of steps other than keep (all of
// them when keep is 0, and then rank 0 removes latest.json first).
func (r *run) removeCheckpoints(keep int) error {
	dir := filepath.Join(r.cfg.Out, checkpointDir)
	if keep == 0 && r.rank == 0 {
		if err := os.Remove(filepath.Join(dir, checkpointLatest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the old checkpoint: %w", err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("step-*.rank-%d.gob", r.rank)))
	if err != nil {
		return err
	}
	for _, f := range files {
		if keep > 0 && f == rankFile(r.cfg.Out, keep, r.rank) {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the old checkpoint: %w", err)
		}
	}
	if keep == 0 {
		os.Remove(dir) // only once empty, i.e. by the last rank to finish
	}
	return nil
}

func (r *run) barrier(what string) error {
	if !r.distributed() {
		return nil
	}
	if err := r.comm.Barrier(); err != nil {
		return fmt.Errorf("waiting until %s: %w", what, err)
	}
	return nil
}

func (r *run) snapshot() (*rankCheckpoint, error) {
	ck := &rankCheckpoint{
		Version: checkpointVersion, Step: r.step, Rank: r.rank, World: r.world,
		Params: values(r.params), Buffers: values(r.model.Buffers()), Velocity: r.opt.velocity,
		Rows: r.rows, Stats: r.stats, Checks: r.checks, LastEval: r.lastRes,
		ElapsedS: time.Since(r.start).Seconds(),
	}
	var err error
	if ck.ModelState, err = r.model.TrainState(); err != nil {
		return nil, err
	}
	if sp, ok := r.pipe.(pipeline.Stateful); ok {
		ck.HasPipeline = true
		if ck.Pipeline, err = sp.State(); err != nil {
			return nil, fmt.Errorf("taking the pipeline's state: %w", err)
		}
	}
	return ck, nil
}

func values(ps []nets.Param) [][]float32 {
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = p.Value
	}
	return out
}

// resumeStep agrees on the step to resume from: rank 0 reads latest.json and tells the
// others, which may not see the file (ranks on other machines).
func (r *run) resumeStep() (int, error) {
	step, readErr := 0, error(nil)
	if r.rank == 0 {
		m, err := readManifest(r.cfg.Resume)
		if err == nil {
			err = r.compatible(m)
		}
		if err != nil {
			readErr = err
			step = -1
		} else {
			step = m.Step
		}
	}
	if r.distributed() {
		wire := binary.LittleEndian.AppendUint64(nil, uint64(int64(step)))
		if err := r.comm.Broadcast(wire, 0); err != nil {
			return 0, errors.Join(readErr, fmt.Errorf("agreeing on the step to resume from: %w", err))
		}
		step = int(int64(binary.LittleEndian.Uint64(wire)))
	}
	if readErr != nil {
		return 0, readErr
	}
	if step < 0 {
		return 0, errors.New("rank 0 could not read the checkpoint")
	}
	return step, nil
}

// compatible reports whether the run may resume from the checkpoint m describes: the same
// world and the same result-shaping settings (Changed), lest the results mix two runs. With
// ResumeChanged it may continue under changed settings, except those the saved state
// cannot fit (the model, the data, the pipeline, ...); the change is then recorded.
func (r *run) compatible(m *manifest) error {
	if m.World != r.world {
		return fmt.Errorf("the checkpoint in %s was written by %d workers; this run has %d", r.cfg.Resume, m.World, r.world)
	}
	if m.ResultsVersion != ResultsVersion {
		return fmt.Errorf("the checkpoint in %s was written by a build whose results differ from this one's (results version %d, now %d): start afresh",
			r.cfg.Resume, m.ResultsVersion, ResultsVersion)
	}
	changed, err := Changed(m.Config, *r.cfg)
	if err != nil {
		return err
	}
	if hard := structural(changed); len(hard) > 0 {
		return fmt.Errorf("the checkpoint in %s belongs to another run: %s", r.cfg.Resume, strings.Join(hard, "; "))
	}
	r.changes = m.Changes
	if len(changed) == 0 {
		return nil
	}
	if !r.cfg.ResumeChanged {
		return fmt.Errorf("the settings changed since the checkpoint in %s was written (%s): resuming would mix two runs; "+
			"start afresh, or pass --resume-changed to continue under the new settings (summary.json then records both)",
			r.cfg.Resume, strings.Join(changed, "; "))
	}
	r.changes = append(slices.Clone(m.Changes), ConfigChange{Step: m.Step, Changed: changed, Previous: m.Config})
	return nil
}

// restore loads this rank's checkpoint of step into the run.
func (r *run) restore(step int) error {
	path := rankFile(r.cfg.Resume, step, r.rank)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading checkpoint: %w", err)
	}
	body, ok := openRankFile(data)
	if !ok {
		return fmt.Errorf("checkpoint %s is damaged: its checksum does not match its contents (remove %s to start afresh)", path, filepath.Dir(path))
	}
	var ck rankCheckpoint
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&ck); err != nil {
		return fmt.Errorf("reading checkpoint %s: %w", path, err)
	}
	if ck.Version != checkpointVersion || ck.Step != step || ck.Rank != r.rank || ck.World != r.world {
		return fmt.Errorf("checkpoint %s holds step %d of rank %d of %d (version %d), want step %d of rank %d of %d",
			path, ck.Step, ck.Rank, ck.World, ck.Version, step, r.rank, r.world)
	}
	if err := r.load(&ck); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

func (r *run) load(ck *rankCheckpoint) error {
	if err := fill("parameter", r.params, ck.Params); err != nil {
		return err
	}
	if err := fill("buffer", r.model.Buffers(), ck.Buffers); err != nil {
		return err
	}
	if (r.opt.velocity == nil) != (ck.Velocity == nil) {
		return errors.New("optimizer momentum was on in one run and off in the other")
	}
	for i, v := range ck.Velocity {
		if i >= len(r.opt.velocity) || len(v) != len(r.opt.velocity[i]) {
			return fmt.Errorf("optimizer state of parameter %d does not fit the model", i)
		}
		copy(r.opt.velocity[i], v)
	}
	if err := r.model.SetTrainState(ck.ModelState); err != nil {
		return err
	}
	sp, stateful := r.pipe.(pipeline.Stateful)
	switch {
	case stateful:
		if err := sp.Restore(ck.Pipeline); err != nil {
			return err
		}
	case ck.HasPipeline && (ck.Pipeline.Residuals != nil || ck.Pipeline.Momenta != nil):
		return fmt.Errorf("pipeline %s keeps no state, the checkpoint holds some", r.cfg.Pipeline)
	}
	r.step, r.rows, r.stats, r.checks, r.lastRes = ck.Step, ck.Rows, ck.Stats, ck.Checks, ck.LastEval
	r.start = time.Now().Add(-time.Duration(ck.ElapsedS * float64(time.Second)))
	return nil
}

// fill copies saved values into ps after checking that every shape fits.
func fill(what string, ps []nets.Param, saved [][]float32) error {
	if len(saved) != len(ps) {
		return fmt.Errorf("%d %ss saved, the model has %d", len(saved), what, len(ps))
	}
	for i, p := range ps {
		if len(saved[i]) != len(p.Value) {
			return fmt.Errorf("%s %s: %d values saved, the model has %d", what, p.Name, len(saved[i]), len(p.Value))
		}
	}
	for i, p := range ps {
		copy(p.Value, saved[i])
	}
	return nil
}
