package assess

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Merge joins the assessment directories of the shards of one assessment (`assess -shard i/N`)
// into out, a new or empty directory: their deployment.yaml must be byte-equal, their rows are
// put in the order one run writes them (settings, attacks, batches, prompts), a batch found in
// two shards must hold the same bytes in both, and every batch of the plan must be present.
// out's results.jsonl is then byte-equal to one unsharded run's, and so are its reports.
func Merge(out string, dirs []string, files *safefile.Files, redact bool) (*Summary, error) {
	if files == nil {
		files = new(safefile.Files)
	}
	if len(dirs) == 0 {
		return nil, errors.New("assess: -merge: name the shards' directories")
	}
	var dep []byte
	type key struct{ setting, attack, batch, pos int }
	byKey := map[key][]byte{}
	var d Deployment
	for i, dir := range dirs {
		depPath := filepath.Join(dir, DeploymentFile)
		b, err := files.ReadNoFollow(depPath, safefile.RunRecord)
		if err != nil {
			return nil, fmt.Errorf("assess: -merge: %w", err)
		}
		if i == 0 {
			dep = b
			if d, err = ParseDeployment(depPath, b); err != nil {
				return nil, err
			}
		} else if !bytes.Equal(b, dep) {
			return nil, fmt.Errorf("assess: -merge: %s is not %s's deployment (%s): the shards are of different assessments",
				depPath, filepath.Join(dirs[0], DeploymentFile), firstDiff(dep, b))
		}
		lines, _, err := readResults(filepath.Join(dir, ResultsFile))
		if err != nil {
			return nil, err
		}
		settings := d.Settings()
		for n, l := range lines {
			r := l.row
			si := slices.IndexFunc(settings, func(s Setting) bool { return s == r.Setting })
			ai := slices.Index(d.Attacker.Attacks, r.Attack)
			if si < 0 || ai < 0 {
				return nil, fmt.Errorf("assess: -merge: %s line %d: setting %s, attack %s: not of the deployment", filepath.Join(dir, ResultsFile), n+1, r.Setting.Name, r.Attack)
			}
			k := key{si, ai, r.Batch, r.Pos}
			if had, ok := byKey[k]; ok && !bytes.Equal(had, l.line) {
				return nil, fmt.Errorf("assess: -merge: %s line %d (%s, %s, batch %d, prompt %d) differs from another shard's row of the same batch",
					filepath.Join(dir, ResultsFile), n+1, r.Setting.Name, r.Attack, r.Batch, r.Pos)
			}
			byKey[k] = l.line
		}
	}
	// Every batch of the plan must be there, whole.
	attacks, err := attacksOf(d)
	if err != nil {
		return nil, err
	}
	var missing []string
	want := 0
	for si, st := range d.Settings() {
		for ai, a := range attacks {
			if a.Check(d) != nil {
				continue
			}
			for _, sl := range slotsOf(d, a) {
				want += sl.rows
				for p := range sl.rows {
					if _, ok := byKey[key{si, ai, sl.batch, p}]; !ok {
						missing = append(missing, fmt.Sprintf("%s/%s/batch %d", st.Name, a.Name(), sl.batch))
					}
				}
			}
		}
	}
	if len(missing) > 0 {
		missing = slices.Compact(missing)
		return nil, fmt.Errorf("assess: -merge: %d batches are in no shard (%s ...): finish the shards (rerun each with -resume) and merge again",
			len(missing), missing[0])
	}
	if len(byKey) != want {
		return nil, fmt.Errorf("assess: -merge: the shards hold %d rows, want %d: rows beyond the plan", len(byKey), want)
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.setting, b.setting), cmp.Compare(a.attack, b.attack), cmp.Compare(a.batch, b.batch), cmp.Compare(a.pos, b.pos))
	})
	var results bytes.Buffer
	for _, k := range keys {
		results.Write(byKey[k])
		results.WriteByte('\n')
	}
	tx, err := files.BeginDir(out)
	if err != nil {
		return nil, fmt.Errorf("assess: -merge: %w", err)
	}
	defer tx.Abort()
	for name, b := range map[string][]byte{DeploymentFile: dep, ResultsFile: results.Bytes()} {
		if err := files.WriteFileAtomic(filepath.Join(tx.Path(), name), b); err != nil {
			return nil, fmt.Errorf("assess: -merge: %w", err)
		}
	}
	s, err := WriteReports(tx.Path(), files, redact)
	if err != nil {
		return nil, err
	}
	return s, tx.Commit()
}
