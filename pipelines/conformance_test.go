package pipelines_test

import (
	"testing"

	_ "github.com/ssfusion/ssfusion/baselines"
	"github.com/ssfusion/ssfusion/pipeline/pipelinetest"
	"github.com/ssfusion/ssfusion/pipelines"
	_ "github.com/ssfusion/ssfusion/ssfusion"
)

// TestConformance holds every registered pipeline to the conformance suite.
func TestConformance(t *testing.T) {
	specs := pipelines.Specs()
	if len(specs) < 14 {
		t.Fatalf("%d pipelines registered, want the 14 shipped", len(specs))
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) { pipelinetest.Conformance(t, spec) })
	}
}
