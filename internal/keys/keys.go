// Package keys turns a configuration struct into command-line flags, so that an option's
// key, flag, help and default are written once, on its field: the mapstructure tag is the
// key (and the flag's name), the usage tag the flag's help, and the struct's value the
// defaults. Fields of structs embedded with the tag ",squash" count as the outer struct's.
package keys

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Field is one key of a configuration struct.
type Field struct {
	Key   string
	Usage string
	Value reflect.Value // settable when the struct was given by pointer
}

// Fields lists the keys of the struct v points to (or is), in field order, embedded
// squashed structs' fields in place.
func Fields(v any) []Field {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	var out []Field
	walk(rv, &out)
	return out
}

func walk(v reflect.Value, out *[]Field) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if f.Anonymous && strings.Contains(tag, "squash") {
			walk(v.Field(i), out)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		*out = append(*out, Field{Key: tag, Usage: f.Tag.Get("usage"), Value: v.Field(i)})
	}
}

// AddFlags adds a flag for every key of the struct v but those in except, with v's values
// as defaults. usage overrides the help of the keys it holds (for help that lists what is
// known only at run time). It panics on a field of a type flags cannot hold: a
// programming error found at start-up.
func AddFlags(fs *pflag.FlagSet, v any, usage map[string]string, except ...string) {
	for _, f := range Fields(v) {
		if slices.Contains(except, f.Key) {
			continue
		}
		help := f.Usage
		if u, ok := usage[f.Key]; ok {
			help = u
		}
		switch x := f.Value.Interface().(type) {
		case string:
			fs.String(f.Key, x, help)
		case bool:
			fs.Bool(f.Key, x, help)
		case int:
			fs.Int(f.Key, x, help)
		case int64:
			fs.Int64(f.Key, x, help)
		case float64:
			fs.Float64(f.Key, x, help)
		case []float64:
			fs.Float64Slice(f.Key, x, help)
		case []int:
			fs.IntSlice(f.Key, x, help)
		case time.Duration:
			fs.Duration(f.Key, x, help)
		default:
			panic(fmt.Sprintf("keys: %s is a %T, which no flag holds", f.Key, x))
		}
	}
}

// FromFlags sets each field of the struct ptr points to whose key has a flag in fs to the
// flag's value.
func FromFlags(fs *pflag.FlagSet, ptr any) error {
	for _, f := range Fields(ptr) {
		if fs.Lookup(f.Key) == nil {
			continue
		}
		var v any
		var err error
		switch f.Value.Interface().(type) {
		case string:
			v, err = fs.GetString(f.Key)
		case bool:
			v, err = fs.GetBool(f.Key)
		case int:
			v, err = fs.GetInt(f.Key)
		case int64:
			v, err = fs.GetInt64(f.Key)
		case float64:
			v, err = fs.GetFloat64(f.Key)
		case []float64:
			v, err = fs.GetFloat64Slice(f.Key)
		case []int:
			v, err = fs.GetIntSlice(f.Key)
		case time.Duration:
			v, err = fs.GetDuration(f.Key)
		}
		if err != nil {
			return fmt.Errorf("flag --%s: %w", f.Key, err)
		}
		f.Value.Set(reflect.ValueOf(v))
	}
	return nil
}
