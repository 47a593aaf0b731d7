package assess

import (
	"fmt"
	"strconv"

	"github.com/gelo-research/geloattack/data/gelo"
)

// Setting is one deployer setting the battery runs on: the deployment itself, or a grid point
// that changes its shields. Every line of results.jsonl carries its setting, so that the reports
// need nothing else to say what was run and what it costs.
type Setting struct {
	// Name is "deployment" for the deployment, "rows=R,scale=S", "kappa=K" (or "orthogonal")
	// or "dtype=T" for a grid point.
	Name string `json:"name"`
	// TextsPerCall and TokensPerText are the deployment's batch.
	TextsPerCall  int `json:"texts_per_call"`
	TokensPerText int `json:"tokens_per_text"`
	// ShieldKind, ShieldRows (0: ShieldFrac of the clean rows), ShieldFrac and ShieldScale are
	// the shields.
	ShieldKind  string  `json:"shield_kind"`
	ShieldRows  int     `json:"shield_rows"`
	ShieldFrac  float64 `json:"shield_frac"`
	ShieldScale float64 `json:"shield_scale"`
	// Mix is orthogonal or kappa, Kappa cond(A) (1 for orthogonal).
	Mix   string  `json:"mix"`
	Kappa float64 `json:"kappa"`
	// ObserveDType and ObsRows are what the accelerator sees.
	ObserveDType string  `json:"observe_dtype"`
	ObsRows      float64 `json:"obs_rows"`
	// DeployerPrecision is the deployer's compute precision.
	DeployerPrecision string `json:"deployer_precision"`
}

// DeploymentSetting is the name of the deployment's own setting.
const DeploymentSetting = "deployment"

// Settings are the settings of a resolved deployment, in report order: the deployment, then with
// the grid enabled every (shield rows, scale) of the grid, rows slowest, then each cond(A) of the
// grid and each observed dtype, alone at the deployment's shields, leaving out a point that is
// the deployment's own setting.
func (d Deployment) Settings() []Setting {
	base := Setting{Name: DeploymentSetting, TextsPerCall: d.Batch.TextsPerCall, TokensPerText: d.Batch.TokensPerText,
		ShieldKind: d.Shields.Kind, ShieldRows: d.Shields.Rows, ShieldFrac: d.Shields.Frac, ShieldScale: d.Shields.Scale,
		Mix: d.Mixing.Kind, Kappa: d.Mixing.Kappa, ObserveDType: d.Observe.DType, ObsRows: d.Observe.Rows,
		DeployerPrecision: d.Deployer.Precision}
	if base.Mix == MixOrthogonal {
		base.Kappa = 1
	}
	if base.ShieldRows > 0 {
		base.ShieldFrac = 0
	}
	out := []Setting{base}
	if !d.Grid.Enabled {
		return out
	}
	for _, rows := range d.Grid.ShieldRows {
		for _, scale := range d.Grid.ShieldScales {
			if rows == base.ShieldRows && scale == base.ShieldScale {
				continue
			}
			s := base
			s.Name = "rows=" + strconv.Itoa(rows) + ",scale=" + strconv.FormatFloat(scale, 'g', -1, 64)
			s.ShieldRows, s.ShieldFrac, s.ShieldScale = rows, 0, scale
			out = append(out, s)
		}
	}
	for _, k := range d.Grid.Kappas {
		if k == base.Kappa {
			continue
		}
		s := base
		s.Name, s.Mix, s.Kappa = "kappa="+strconv.FormatFloat(k, 'g', -1, 64), MixKappa, k
		if k == 1 {
			s.Name, s.Mix = "orthogonal", MixOrthogonal
		}
		out = append(out, s)
	}
	for _, t := range d.Grid.ObserveDTypes {
		if t == base.ObserveDType {
			continue
		}
		s := base
		s.Name, s.ObserveDType = "dtype="+t, t
		out = append(out, s)
	}
	return out
}

// Shields is the number of shield rows of a call of n clean rows.
func (s Setting) Shields(n int) int {
	if s.ShieldRows > 0 {
		return s.ShieldRows
	}
	return ceilCount(s.ShieldFrac * float64(n))
}

// NominalRows is n, the clean rows of a full call: TextsPerCall x TokensPerText.
func (s Setting) NominalRows() int { return s.TextsPerCall * s.TokensPerText }

// ceilCount is ceil(x) for counts, tolerant of round-off (0.1 x 70 = 7.000000000000001 is 7), as
// the sampler counts shields.
func ceilCount(x float64) int {
	c := int(x)
	if float64(c) < x-1e-9 {
		c++
	}
	return c
}

// Describe is the setting in words, for tables.
func (s Setting) Describe() string {
	shields := fmt.Sprintf("%d %s rows", s.ShieldRows, s.ShieldKind)
	if s.ShieldRows == 0 {
		shields = fmt.Sprintf("%s (%s%% of the clean rows)", s.ShieldKind, strconv.FormatFloat(100*s.ShieldFrac, 'g', 4, 64))
	}
	mix := "orthogonal A"
	if s.Mix == MixKappa {
		mix = "cond(A) " + strconv.FormatFloat(s.Kappa, 'g', -1, 64)
	}
	dtype := "float32"
	if s.ObserveDType != DTypeNone {
		dtype = s.ObserveDType
	}
	observed := "every row"
	if s.ObsRows < 1 {
		observed = strconv.FormatFloat(s.ObsRows, 'g', -1, 64) + " of the rows"
	}
	return fmt.Sprintf("%d texts x %d tokens per call; shields %s at scale %s; %s; %s observed in %s; %s deployer",
		s.TextsPerCall, s.TokensPerText, shields, strconv.FormatFloat(s.ShieldScale, 'g', -1, 64), mix, observed, dtype,
		s.DeployerPrecision)
}

// sampler is the GELO sampler configuration of one batch of this setting: positives texts per
// example, the deployment's secrets, seed the batch's own.
func (s Setting) sampler(seed uint64, valFrac float64, positives int) gelo.Config {
	c := gelo.DefaultConfig()
	c.Seed, c.ValFrac = seed, valFrac
	c.Positives = gelo.Fixed(float64(positives))
	c.ShieldKind = gelo.ShieldKind(s.ShieldKind)
	c.ShieldRows = s.ShieldRows
	c.ShieldFrac = gelo.Fixed(s.ShieldFrac)
	c.ShieldScale = gelo.Fixed(s.ShieldScale)
	c.Mix, c.MixCond = gelo.MixOrthogonal, gelo.Fixed(1)
	if s.Mix == MixKappa {
		c.Mix, c.MixCond = gelo.MixNonOrthogonal, gelo.Fixed(s.Kappa)
	}
	c.ObsRows = s.ObsRows
	c.ObserveDtype = gelo.ObserveDtype(s.ObserveDType)
	return c
}
