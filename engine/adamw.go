package engine

import (
	"errors"
	"fmt"
	"math"
)

// AdamWConfig holds AdamW's hyper-parameters. Weight decay is decoupled
// (Loshchilov & Hutter): p -= lr*WeightDecay*p, applied only to parameters
// registered with decay = true (see DefaultDecay for the project's rule).
// No field has a hidden default: NewAdamW uses exactly what it is given, so
// Beta1 = 0 (no momentum) and Beta2 = 0 (no second-moment history) mean
// what they say. PyTorch's defaults are Beta1 0.9, Beta2 0.999, Eps 1e-8.
type AdamWConfig struct {
	LR          float32 // base learning rate, used when Schedule is nil
	Beta1       float32 // first-moment decay rate, in [0, 1)
	Beta2       float32 // second-moment decay rate, in [0, 1)
	Eps         float32 // added to sqrt(v); > 0, or a zero gradient divides 0 by 0
	WeightDecay float32 // decoupled decay of parameters registered with decay = true
	// Schedule, when set, gives the learning rate of step t (1-based: the
	// first Step call uses Schedule(1)).
	Schedule func(step int) float32
}

// AdamW is the optimiser over one Params: its moments m and v have the
// parameter buffer's layout, so an update is one pass per decay class.
type AdamW struct {
	cfg  AdamWConfig
	p    *Params
	m, v *Tensor // (Params.Len())
	step int
	lr   float32
}

// NewAdamW allocates zero moments for p (which must be allocated). It uses
// cfg as given: betas in [0, 1), eps > 0, learning rate and weight decay
// >= 0, all finite; anything else is an error.
func NewAdamW(p *Params, cfg AdamWConfig) (*AdamW, error) {
	if p.data == nil {
		return nil, errors.New("engine: NewAdamW: parameters not allocated")
	}
	for _, b := range []struct {
		name string
		v    float32
	}{{"beta1", cfg.Beta1}, {"beta2", cfg.Beta2}} {
		if !(b.v >= 0 && b.v < 1) {
			return nil, fmt.Errorf("engine: AdamW %s = %g: want 0 <= %s < 1", b.name, b.v, b.name)
		}
	}
	if !(cfg.Eps > 0) || math.IsInf(float64(cfg.Eps), 0) {
		return nil, fmt.Errorf("engine: AdamW eps = %g: want a finite value > 0 (PyTorch's default is 1e-8)", cfg.Eps)
	}
	if !(cfg.WeightDecay >= 0 && cfg.LR >= 0) || math.IsInf(float64(cfg.WeightDecay), 0) || math.IsInf(float64(cfg.LR), 0) {
		return nil, fmt.Errorf("engine: AdamW: weight decay %g and learning rate %g: want finite values >= 0", cfg.WeightDecay, cfg.LR)
	}
	be := p.data.st.Backend()
	ms, err := be.Alloc(p.total)
	if err != nil {
		return nil, fmt.Errorf("engine: AdamW first moment: %w", err)
	}
	vs, err := be.Alloc(p.total)
	if err != nil {
		return nil, fmt.Errorf("engine: AdamW second moment: %w", err)
	}
	o := &AdamW{cfg: cfg, p: p}
	o.m = &Tensor{st: ms, ndim: 1, size: p.total, name: "adamw.m", node: -1}
	o.m.shape[0] = p.total
	o.v = &Tensor{st: vs, ndim: 1, size: p.total, name: "adamw.v", node: -1}
	o.v.shape[0] = p.total
	return o, nil
}

// SetSchedule sets the learning-rate schedule (nil: constant LR).
func (o *AdamW) SetSchedule(f func(step int) float32) { o.cfg.Schedule = f }

// StepCount is the number of updates made so far.
func (o *AdamW) StepCount() int { return o.step }

// LR is the learning rate used by the last Step.
func (o *AdamW) LR() float32 { return o.lr }

// next advances the step count and returns that step's scalars (Decay 0:
// the caller sets it per decay class).
func (o *AdamW) next() AdamWStep {
	o.step++
	lr := o.cfg.LR
	if o.cfg.Schedule != nil {
		lr = o.cfg.Schedule(o.step)
	}
	o.lr = lr
	t := float64(o.step)
	return AdamWStep{
		LR: lr, Beta1: o.cfg.Beta1, Beta2: o.cfg.Beta2, Eps: o.cfg.Eps,
		BiasCorr1: float32(1 - math.Pow(float64(o.cfg.Beta1), t)),
		BiasCorr2: float32(1 - math.Pow(float64(o.cfg.Beta2), t)),
	}
}

// Step applies one AdamW update from the current gradients and leaves the
// gradients zero (in the same pass), ready for the next Backward.
func (o *AdamW) Step() {
	s := o.next()
	be := o.p.data.st.Backend()
	// The update is elementwise, and Params lays each decay class out as
	// one range, so a step is one kernel per class (two for a model with
	// both) instead of one per tensor or per run of equal decay: a GPU
	// launch costs microseconds, a norm weight has h values.
	for _, r := range o.p.runs {
		s.Decay = 0
		if r.decay {
			s.Decay = o.cfg.WeightDecay
		}
		be.AdamW(flatView(o.p.data, r.off, r.n), flatView(o.p.grad, r.off, r.n), flatView(o.m, r.off, r.n), flatView(o.v, r.off, r.n), s)
	}
}

// flatView is elements [off, off+n) of buf as a 1-D tensor.
func flatView(buf *Tensor, off, n int) *Tensor {
	t := &Tensor{st: buf.st, off: buf.off + off, size: n, ndim: 1, name: buf.name, node: -1}
	t.shape[0] = n
	return t
}

// view is the part of a moment buffer that belongs to parameter pv.
func (o *AdamW) view(buf *Tensor, pv ParamView) *Tensor {
	t := *pv.Tensor
	t.st, t.off, t.grad, t.param, t.needGrad = buf.st, pv.Offset, nil, false, false
	return &t
}

// AdamWState is the optimiser state for checkpoints: the step count and the
// moments of every parameter by name.
type AdamWState struct {
	Step int                  // updates made
	M, V map[string][]float32 // first and second moments by parameter name
}

// State copies the optimiser state to the host.
func (o *AdamW) State() AdamWState {
	st := AdamWState{Step: o.step, M: map[string][]float32{}, V: map[string][]float32{}}
	for _, pv := range o.p.views {
		st.M[pv.Name] = o.view(o.m, pv).ToHost()
		st.V[pv.Name] = o.view(o.v, pv).ToHost()
	}
	return st
}

// SetState restores a state saved by State; every parameter must be present
// with its size, and no unknown names may appear.
func (o *AdamW) SetState(st AdamWState) error {
	if st.Step < 0 {
		return fmt.Errorf("engine: AdamW state: negative step %d", st.Step)
	}
	for _, mom := range []struct {
		name string
		m    map[string][]float32
	}{{"m", st.M}, {"v", st.V}} {
		for _, pv := range o.p.views {
			vals, ok := mom.m[pv.Name]
			if !ok {
				return fmt.Errorf("engine: AdamW state: %s lacks %q", mom.name, pv.Name)
			}
			if len(vals) != pv.Size {
				return fmt.Errorf("engine: AdamW state: %s[%q] has %d values, want %d", mom.name, pv.Name, len(vals), pv.Size)
			}
		}
		if len(mom.m) != len(o.p.views) {
			for name := range mom.m {
				if _, ok := o.p.index[name]; !ok {
					return fmt.Errorf("engine: AdamW state: %s has unknown tensor %q", mom.name, name)
				}
			}
		}
	}
	for _, pv := range o.p.views {
		if err := o.view(o.m, pv).CopyFrom(st.M[pv.Name]); err != nil {
			return err
		}
		if err := o.view(o.v, pv).CopyFrom(st.V[pv.Name]); err != nil {
			return err
		}
	}
	o.step = st.Step
	return nil
}

// GradNorm is the global Euclidean norm of all parameter gradients.
func GradNorm(p *Params) float64 {
	if p.grad == nil {
		return 0 // not allocated: no gradients
	}
	return math.Sqrt(p.grad.st.Backend().SumSquaresHost(p.grad))
}

// ClipGradNorm scales all parameter gradients so that their global norm is
// at most maxNorm and returns the norm before clipping (NaN or Inf when a
// gradient is not finite; nothing is scaled then).
func ClipGradNorm(p *Params, maxNorm float32) float64 {
	norm := GradNorm(p)
	if norm > float64(maxNorm) && !math.IsInf(norm, 0) {
		be := p.grad.st.Backend()
		be.Unary(UnaryScale, p.grad, p.grad, float32(float64(maxNorm)/(norm+1e-6)))
	}
	return norm
}

// NonFiniteError names a tensor holding NaN or Inf.
type NonFiniteError struct {
	Tensor string // parameter or gradient name
	Value  string // "NaN" when any element is NaN, else "Inf"
}

// Error says which tensor is not finite, e.g. "tensor layers.3.mlp.up_proj.weight.grad has NaN".
func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("tensor %s has %s", e.Tensor, e.Value)
}

// nonFinite returns the error for a tensor whose sum of squares is s, or
// nil when s is finite (sums of float32 squares in float64 cannot overflow).
func nonFinite(name string, s float64) error {
	switch {
	case math.IsNaN(s):
		return &NonFiniteError{Tensor: name, Value: "NaN"}
	case math.IsInf(s, 0):
		return &NonFiniteError{Tensor: name, Value: "Inf"}
	}
	return nil
}

// CheckFinite returns a *NonFiniteError naming the first parameter whose
// gradient (name + ".grad") or value holds NaN or Inf, nil when all are
// finite. One pass over the flat buffers; the per-tensor search runs only
// when something is wrong.
func CheckFinite(p *Params) error {
	if p.data == nil {
		return errors.New("engine: CheckFinite: parameters not allocated")
	}
	be := p.data.st.Backend()
	for _, buf := range []struct {
		t    *Tensor
		grad bool
	}{{p.grad, true}, {p.data, false}} {
		if s := be.SumSquaresHost(buf.t); !math.IsNaN(s) && !math.IsInf(s, 0) {
			continue
		}
		for _, pv := range p.views {
			t := pv.Tensor
			name := pv.Name
			if buf.grad {
				t, name = t.grad, name+".grad"
			}
			if err := nonFinite(name, be.SumSquaresHost(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckFiniteTensor returns a *NonFiniteError naming t when t (a loss, an
// activation) holds NaN or Inf.
func CheckFiniteTensor(t *Tensor) error {
	return nonFinite(t.name, t.st.Backend().SumSquaresHost(t))
}
