package datasets

import (
	"bufio"
	"fmt"
	"os"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// The python version of CIFAR (what torchvision downloads) pickles each batch as a dict whose
// "data" is a numpy uint8 array of N rows of 3072 pixels, channel-planar like the binary
// version, and whose labels are a list of N ints. Unpickling a numpy array calls numpy's
// reconstructor and then sets its state; the types below stand in for numpy's so that the
// pixels can be read without Python.

// ndarray is a numpy array as its pickled state describes it.
type ndarray struct {
	shape []int
	dtype string
	data  []byte
}

// PySetState takes numpy's array state: (version, shape, dtype, is_fortran, raw bytes).
func (a *ndarray) PySetState(state any) error {
	t, ok := state.(*types.Tuple)
	if !ok || t.Len() != 5 {
		return fmt.Errorf("numpy array state is %T, expected a tuple of 5", state)
	}
	shape, ok := t.Get(1).(*types.Tuple)
	if !ok {
		return fmt.Errorf("numpy array shape is %T, expected a tuple", t.Get(1))
	}
	for _, d := range *shape {
		n, ok := d.(int)
		if !ok || n < 0 {
			return fmt.Errorf("numpy array dimension %v is not a size", d)
		}
		a.shape = append(a.shape, n)
	}
	dt, ok := t.Get(2).(*dtype)
	if !ok {
		return fmt.Errorf("numpy array dtype is %T, expected numpy.dtype", t.Get(2))
	}
	a.dtype = dt.name
	if fortran, _ := t.Get(3).(bool); fortran {
		return fmt.Errorf("numpy array is in Fortran order, expected C order")
	}
	switch raw := t.Get(4).(type) {
	case string: // pickled by Python 2, as the published files were
		a.data = []byte(raw)
	case []byte:
		a.data = raw
	default:
		return fmt.Errorf("numpy array data is %T, expected bytes", raw)
	}
	return nil
}

// dtype is a numpy dtype; only its name ("u1" for uint8) matters here.
type dtype struct{ name string }

func (d *dtype) PySetState(any) error { return nil }

type callable func(args ...any) (any, error)

func (f callable) Call(args ...any) (any, error) { return f(args...) }

// numpyClass resolves the globals a pickled numpy array refers to.
func numpyClass(module, name string) (any, error) {
	switch module + "." + name {
	case "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct":
		return callable(func(...any) (any, error) { return &ndarray{}, nil }), nil
	case "numpy.ndarray":
		return types.NewGenericClass(module, name), nil
	case "numpy.dtype":
		return callable(func(args ...any) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("numpy.dtype called without a type name")
			}
			s, ok := args[0].(string)
			if !ok {
				return nil, fmt.Errorf("numpy.dtype called with %T, expected a type name", args[0])
			}
			return &dtype{name: s}, nil
		}), nil
	}
	return nil, fmt.Errorf("unexpected Python class %s.%s (a CIFAR batch holds only numpy arrays, lists and strings)", module, name)
}

// unpickle reads the single pickled value in path. The unpickler is third-party code fed
// with a file from the internet, so a panic in it is turned into an error.
func unpickle(path string) (v any, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("malformed pickle: %v", r)
		}
	}()
	u := pickle.NewUnpickler(bufio.NewReader(f))
	u.FindClass = numpyClass
	return u.Load()
}

// dictGet finds key in a pickled dict, whose keys are str when pickled by Python 2 and bytes
// when by Python 3.
func dictGet(d *types.Dict, key string) (any, bool) {
	for _, e := range *d {
		switch k := e.Key.(type) {
		case string:
			if k == key {
				return e.Value, true
			}
		case []byte:
			if string(k) == key {
				return e.Value, true
			}
		}
	}
	return nil, false
}

// readCIFARPickle appends the images and labels of one batch of the python version to set.
func readCIFARPickle(path, labelKey string, src source, set *ImageSet) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s (expected a batch of the python version, as torchvision downloads it; %s)",
			src.name, path, fmt.Sprintf(format, args...), src.wants())
	}
	v, err := unpickle(path)
	if err != nil {
		return fail("%v", err)
	}
	d, ok := v.(*types.Dict)
	if !ok {
		return fail("holds a %T, not a dict", v)
	}
	rawData, ok := dictGet(d, "data")
	if !ok {
		return fail("has no \"data\" entry")
	}
	arr, ok := rawData.(*ndarray)
	if !ok {
		return fail("\"data\" is a %T, not a numpy array", rawData)
	}
	if arr.dtype != "u1" || len(arr.shape) != 2 || arr.shape[1] != cifarPixels || len(arr.data) != arr.shape[0]*cifarPixels {
		return fail("\"data\" is a %s array of shape %v with %d bytes, expected uint8 (u1) of shape (N, %d)",
			arr.dtype, arr.shape, len(arr.data), cifarPixels)
	}
	rawLabels, ok := dictGet(d, labelKey)
	if !ok {
		return fail("has no %q entry", labelKey)
	}
	labels, ok := rawLabels.(*types.List)
	if !ok || labels.Len() != arr.shape[0] {
		return fail("%q is not a list of %d labels", labelKey, arr.shape[0])
	}
	for i, l := range *labels {
		n, ok := l.(int)
		if !ok || n < 0 || n >= set.Classes {
			return fail("label %d is %v, expected 0..%d", i, l, set.Classes-1)
		}
		set.Labels = append(set.Labels, int32(n))
	}
	set.Pixels = append(set.Pixels, arr.data...)
	return nil
}
