package experiments

import (
	"fmt"

	"github.com/ssfusion/ssfusion/trainer"
)

// Preflight checks what would otherwise fail only when its cell comes up: every pipeline
// exists and takes its cell's settings, and every data set the cells read is there. Its
// errors name path, the experiment file, and say how to leave a cell out or get its data.
func Preflight(path string, cells []Cell) error {
	checked := map[[2]string]bool{} // data set and folder
	for _, c := range cells {
		if err := trainer.CheckPipeline(c.Config); err != nil {
			return fmt.Errorf("experiment %s, cell %s: %w (exclude: leaves such a combination out)", path, c.Name, err)
		}
		key := [2]string{c.Config.Dataset, c.Config.DataDir}
		if checked[key] {
			continue
		}
		checked[key] = true
		if err := trainer.CheckData(&c.Config); err != nil {
			return fmt.Errorf("experiment %s needs data set %s: %w\n(fetch it with `ssfusion data fetch %s`, or pass the folder with --data-dir)", path, c.Config.Dataset, err, c.Config.Dataset)
		}
	}
	return nil
}
