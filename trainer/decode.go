package trainer

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// DecodeHook is how configuration values from files and the environment decode into a
// Config, as train and the experiment files read them: text becomes the key's type, a
// duration needs its unit ("10s"; a bare 10 would be 10 ns), a list may be written
// comma-separated, and a number with a fraction does not fit a count (max-steps: 5.7 is an
// error, not 5 steps).
func DecodeHook() mapstructure.DecodeHookFunc {
	return mapstructure.ComposeDecodeHookFunc(
		strictNumbers,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	)
}

var durationType = reflect.TypeOf(time.Duration(0))

// strictNumbers refuses the conversions a weakly typed decoder would make silently.
func strictNumbers(from, to reflect.Type, data any) (any, error) {
	if to == durationType && from != durationType && from.Kind() != reflect.String {
		return nil, fmt.Errorf("%v is not a duration: give it a unit, such as 60s or 100ms", data)
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if f, ok := data.(float64); ok && (f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("%v is not a whole number", data)
		}
		if f, ok := data.(float32); ok && float64(f) != math.Trunc(float64(f)) {
			return nil, fmt.Errorf("%v is not a whole number", data)
		}
	}
	return data, nil
}

// checkFinite reports every float field of c (and element of a float list) that is NaN or
// infinite, by its key: no range check can catch NaN, which compares false with everything.
func (c *Config) checkFinite() []error { return finite(reflect.ValueOf(c).Elem()) }

// finite is checkFinite of a struct value, and of the structs it embeds.
func finite(v reflect.Value) []error {
	var errs []error
	t := v.Type()
	for i := range t.NumField() {
		key := t.Field(i).Tag.Get("mapstructure")
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			if t.Field(i).Anonymous {
				errs = append(errs, finite(f)...)
			}
		case reflect.Float32, reflect.Float64:
			if x := f.Float(); math.IsNaN(x) || math.IsInf(x, 0) {
				errs = append(errs, fmt.Errorf("%s must be a finite number, got %g", key, x))
			}
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Float64 {
				continue
			}
			for j := range f.Len() {
				if x := f.Index(j).Float(); math.IsNaN(x) || math.IsInf(x, 0) {
					errs = append(errs, fmt.Errorf("%s must hold finite numbers, got %g", key, x))
					break
				}
			}
		}
	}
	return errs
}
