package experiments

// The shipped pipelines, which the configurations of these tests name.
import (
	_ "github.com/ssfusion/ssfusion/baselines"
	_ "github.com/ssfusion/ssfusion/ssfusion"
)
