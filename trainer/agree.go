package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/ssfusion/ssfusion/dist"
)

// rankRecord is what each rank tells the others before the first collective: where it
// runs, which build, and with which configuration.
type rankRecord struct {
	Host           string `json:"host"`
	ResultsVersion int    `json:"results_version"`
	Config         Config `json:"config"`
}

// agreeOnJob checks, before any other collective, that every rank of the job trains the
// same thing: the same result-shaping configuration (Changed) from a build with the same
// ResultsVersion. Otherwise every rank fails with the same error, which names each rank
// that differs from rank 0, the host it runs on and what differs, so that a node started
// with other flags or another build is found at once rather than through diverging
// parameters.
func agreeOnJob(comm dist.Communicator, cfg Config) error {
	if comm == nil || comm.Size() == 1 {
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	mine, err := json.Marshal(rankRecord{Host: host, ResultsVersion: ResultsVersion, Config: cfg})
	if err != nil {
		return fmt.Errorf("encoding this rank's configuration: %w", err)
	}
	all, err := comm.AllGatherV(mine)
	if err != nil {
		return fmt.Errorf("agreeing on the job's configuration: %w", err)
	}
	records := make([]rankRecord, len(all))
	for r, data := range all {
		if err := json.Unmarshal(data, &records[r]); err != nil {
			return fmt.Errorf("rank %d sent a configuration this build cannot read: %w", r, err)
		}
	}
	var problems []string
	for r := 1; r < len(records); r++ {
		got, want := records[r], records[0]
		if got.ResultsVersion != want.ResultsVersion {
			problems = append(problems, fmt.Sprintf("rank %d (on %s) runs a build of results version %d, rank 0 (on %s) one of %d",
				r, got.Host, got.ResultsVersion, want.Host, want.ResultsVersion))
			continue
		}
		changed, err := Changed(want.Config, got.Config)
		if err != nil {
			return err
		}
		if len(changed) > 0 {
			problems = append(problems, fmt.Sprintf("rank %d (on %s) differs from rank 0 (on %s): %s",
				r, got.Host, want.Host, strings.Join(changed, "; ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the ranks do not run the same job (start every node with the same flags and build):\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
