package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"github.com/ssfusion/ssfusion/internal/keys"
	"github.com/ssfusion/ssfusion/pipelines"
	"github.com/ssfusion/ssfusion/trainer"
)

func newTrainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Run one training",
		Long: `Train one model with one gradient pipeline and write summary.json and metrics.csv
into --out (default results/train/<model>-<dataset>-<pipeline>-w<workers>-s<seed>/).

Every flag is also a key of the --config YAML file and an SSF_* environment variable
(--batch-size is batch-size: in the file and SSF_BATCH_SIZE in the environment).
Flags win over the environment, the environment over the file.`,
		Args: usageArgs(cobra.NoArgs),
	}
	addTrainFlags(cmd.Flags(), trainer.Defaults())
	cmd.Flags().String("config", "", "YAML file of configuration keys (the flag names)")
	var nodes placement
	cmd.Flags().IntVar(&nodes.nodes, "nnodes", 1, "machines the job spans, each running this command with --workers processes (as torchrun)")
	cmd.Flags().IntVar(&nodes.nodeRank, "node-rank", 0, "this machine's place among --nnodes: its workers are ranks node-rank*workers and up")
	cmd.Flags().StringVar(&nodes.masterAddr, "master-addr", "", "with --nnodes > 1: the host of node 0, where rank 0 listens")
	cmd.Flags().IntVar(&nodes.masterPort, "master-port", 29500, "with --nnodes > 1: the port rank 0 listens on")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd.Flags())
		if err != nil {
			return err
		}
		// Checked here, before any worker process starts, rather than in each of them.
		resolved := cfg
		resolved.Resolve()
		if err := resolved.Validate(); err != nil {
			return usage(fmt.Errorf("invalid configuration:\n%w", err))
		}
		if err := nodes.check(); err != nil {
			return usage(err)
		}
		return trainOn(cmd.Context(), cfg, nodes)
	}
	return cmd
}

func addTrainFlags(f *pflag.FlagSet, d trainer.Config) {
	keys.AddFlags(f, d, pipelines.FlagUsage())
}

// loadConfig resolves the configuration from flags, SSF_* variables and the --config file.
func loadConfig(flags *pflag.FlagSet) (trainer.Config, error) {
	v := viper.New()
	v.SetEnvPrefix("SSF")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	var bindErr error
	flags.VisitAll(func(f *pflag.Flag) {
		if !launcherFlags[f.Name] && bindErr == nil {
			bindErr = v.BindPFlag(f.Name, f)
		}
	})
	if bindErr != nil {
		return trainer.Config{}, bindErr
	}
	// What the user wrote is wrong: a usage error. Reading a checkpoint is not.
	if path, _ := flags.GetString("config"); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return trainer.Config{}, usage(fmt.Errorf("reading config %s: %w", path, err))
		}
	}
	if err := resumeDefaults(v, flags); err != nil {
		return trainer.Config{}, err
	}
	var cfg trainer.Config
	if err := v.UnmarshalExact(&cfg, viper.DecodeHook(trainer.DecodeHook())); err != nil {
		return trainer.Config{}, usage(fmt.Errorf("configuration: %w", err))
	}
	if len(cfg.MLPHidden) == 0 {
		// An unset list reads back as the nil the defaults hold, not as an empty one, so
		// that a configuration written and read again compares equal.
		cfg.MLPHidden = nil
	}
	return cfg, nil
}

// resumeDefaults makes `train --resume DIR` continue the run in DIR as it was configured:
// without a --config file the checkpoint's configuration stands in for one, and the
// results go to DIR (where the checkpoint is) unless --out says otherwise.
func resumeDefaults(v *viper.Viper, flags *pflag.FlagSet) error {
	dir := v.GetString("resume")
	if dir == "" {
		return nil
	}
	if path, _ := flags.GetString("config"); path == "" {
		saved, err := trainer.ReadCheckpointConfig(dir)
		if err != nil {
			return err
		}
		// Leave to this invocation whether changed settings are allowed: the run being
		// resumed may have been allowed them once.
		saved.Resume, saved.ResumeChanged = dir, false
		// The checkpoint records the job's world; a launcher of one of several nodes
		// starts its share of it.
		if nodes, _ := flags.GetInt("nnodes"); nodes > 1 && !flags.Changed("workers") {
			if saved.Workers%nodes != 0 {
				return usage(fmt.Errorf("the checkpoint in %s was written by %d workers, which %d nodes cannot share evenly: give --workers", dir, saved.Workers, nodes))
			}
			saved.Workers /= nodes
		}
		keys, err := saved.Keys()
		if err != nil {
			return err
		}
		if err := v.MergeConfigMap(keys); err != nil {
			return fmt.Errorf("using the configuration of the checkpoint in %s: %w", dir, err)
		}
	}
	if !flags.Changed("out") {
		v.Set("out", dir)
	}
	return nil
}

// launcherFlags are the flags of train that are not configuration keys: where to read the
// configuration, and where this launcher sits among several nodes. A worker takes the
// latter from its environment.
var launcherFlags = map[string]bool{"config": true, "help": true, "nnodes": true, "node-rank": true, "master-addr": true, "master-port": true}
