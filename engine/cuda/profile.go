package cuda

import (
	"fmt"
	"sort"
	"strings"
)

// profiler times every kernel and cuBLAS call on the device with a pair of
// CUDA events around it (GELOATTACK_CUDA_PROFILE=1 or
// BackendOptions.Profile). The events serialise nothing, but recording them
// costs host time: profile to learn where device time goes, not to time
// steps.
type profiler struct {
	free    []uintptr // events ready for reuse
	pending []profEvent
	total   map[string]*profStat
}

type profEvent struct {
	name       string
	start, end uintptr
}

type profStat struct {
	calls int
	ms    float64
}

// event returns an unused event.
func (b *Backend) profEvent() uintptr {
	p := b.prof
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		return e
	}
	var e uintptr
	b.fail(b.dev.Drv.Check("cuEventCreate", b.dev.Drv.cuEventCreate(&e, 0)))
	return e
}

// profStart records the start of call name; profStop its end.
func (b *Backend) profStart(name string) {
	e := b.profEvent()
	b.dev.Drv.cuEventRecord(e, b.dev.stream)
	b.prof.pending = append(b.prof.pending, profEvent{name: name, start: e})
}

func (b *Backend) profStop() {
	e := b.profEvent()
	b.dev.Drv.cuEventRecord(e, b.dev.stream)
	b.prof.pending[len(b.prof.pending)-1].end = e
	if len(b.prof.pending) >= 4096 {
		b.profCollect()
	}
}

// profCollect waits for the recorded events and adds their times.
func (b *Backend) profCollect() {
	p := b.prof
	for _, ev := range p.pending {
		var ms float32
		b.dev.Drv.cuEventSynchronize(ev.end)
		b.dev.Drv.cuEventElapsedTime(&ms, ev.start, ev.end)
		st := p.total[ev.name]
		if st == nil {
			st = &profStat{}
			p.total[ev.name] = st
		}
		st.calls++
		st.ms += float64(ms)
		p.free = append(p.free, ev.start, ev.end)
	}
	p.pending = p.pending[:0]
}

// ProfileReport returns the device time of each kernel and GEMM shape since
// the last report, most expensive first, and starts counting afresh; "" when
// the backend is not profiling.
func (b *Backend) ProfileReport() string {
	if b.prof == nil || !b.begin() {
		return ""
	}
	defer b.end()
	b.profCollect()
	type row struct {
		name string
		profStat
	}
	var rows []row
	var total float64
	for n, s := range b.prof.total {
		rows = append(rows, row{n, *s})
		total += s.ms
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ms > rows[j].ms })
	var sb strings.Builder
	fmt.Fprintf(&sb, "device time %.2f ms in %d kinds of call\n", total, len(rows))
	for _, r := range rows {
		fmt.Fprintf(&sb, "%9.3f ms %5.1f%% %6d calls  %s\n", r.ms, 100*r.ms/max(total, 1e-9), r.calls, r.name)
	}
	b.prof.total = map[string]*profStat{}
	return sb.String()
}
