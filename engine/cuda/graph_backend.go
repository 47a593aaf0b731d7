package cuda

import (
	"fmt"
	"os"
)

// The training loop's side of the step graphs (graph.go): it brackets each step's forward and
// backward with BeginStep and EndStep; everything else about graphs stays in this package.

// initGraphs sets up the mode BackendOptions or GELOATTACK_CUDA_GRAPHS asks for. A driver or
// cuBLAS that cannot do graphs leaves them off with a logged reason; it never fails the backend.
func (b *Backend) initGraphs(opts BackendOptions) error {
	mode := opts.Graphs
	if mode == GraphsFromEnv {
		m, err := graphModeFromEnv()
		if err != nil {
			return err
		}
		mode = m
	}
	if mode == GraphsOff {
		return nil
	}
	log := opts.GraphLog
	if log == nil {
		log = os.Stderr
	}
	b.gdrv = &deviceGraphs{d: b.dev}
	b.graphs = newStepGraphs(mode, b.gdrv, log)
	if why := b.dev.Drv.graphsUnavailable(); why != "" && mode == GraphsOn {
		b.graphs.turnOff(why)
		return nil
	}
	if b.dev.Blas.setWorkspace == nil {
		b.graphs.turnOff(fmt.Sprintf("cuBLAS %s lacks cublasSetWorkspace_v2 (a GEMM could allocate under capture)", b.dev.Blas.Path))
		return nil
	}
	ws := b.alloc(graphWorkspaceBytes / 4)
	if err := b.Err(); err != nil {
		return err
	}
	if err := cublasCheck("cublasSetWorkspace_v2", b.dev.Blas.setWorkspace(b.dev.handle, ws, graphWorkspaceBytes)); err != nil {
		b.graphs.turnOff(err.Error())
	}
	return nil
}

// flushRecorded ends the step being recorded, if any, and runs it: called before anything that
// waits for the device or frees memory, and by EndStep.
func (d *Device) flushRecorded() error {
	r := d.rec
	if r == nil {
		return nil
	}
	d.rec = nil
	return r.flush()
}

// deferringUploads reports whether an upload now is recorded into the step. The uploads a step
// makes before its first other command (the batch: U, or X and A, and the mask) go to the stream
// at once instead, by the usual path (page-locked halves, the copy overlapping the DMA): nothing
// recorded precedes them, so stream order is kept, and the DMA overlaps the rest of the
// recording instead of heading the graph. The list, and so the graph, holds what follows them.
func (d *Device) deferringUploads() bool { return d.rec != nil && d.rec.list.n > 0 }

// BeginStep starts recording a training step's device work when graphs are on
// (GELOATTACK_CUDA_GRAPHS=1 or BackendOptions.Graphs): the calls that follow queue nothing until
// the step's first read back to the host (its loss), Sync or EndStep, which run the whole step,
// as a graph when an identical step was seen before. Without graphs it does nothing.
func (b *Backend) BeginStep() {
	if b.graphs == nil || !b.begin() {
		return
	}
	defer b.end()
	if b.prof != nil {
		b.graphs.turnOff("profiling (GELOATTACK_CUDA_PROFILE) brackets every call with events")
		return
	}
	if b.graphs.start() {
		b.dev.rec = b.graphs
	}
}

// EndStep runs what BeginStep recorded and nothing has run yet (a no-op when the step's loss
// download already ran it, or without graphs).
func (b *Backend) EndStep() {
	if b.dev == nil || b.dev.rec == nil {
		return
	}
	if !b.begin() { // an earlier call failed: the step is not run
		b.dev.rec.discard()
		b.dev.rec = nil
		return
	}
	defer b.end()
	b.fail(b.dev.flushRecorded())
}

// GraphStats says what the step graphs did (mode "off" and zero counts without graphs).
func (b *Backend) GraphStats() GraphStats {
	if b.graphs == nil {
		return GraphStats{Mode: GraphsOff.String()}
	}
	return b.graphs.Stats()
}

// closeGraphs frees the graphs and their staging memory, once the stream is idle, and logs the
// summary.
func (b *Backend) closeGraphs() {
	if b.graphs == nil {
		return
	}
	if b.graphs.log != nil && b.graphs.stats.Steps > 0 {
		fmt.Fprintln(b.graphs.log, b.graphs.Stats().String())
	}
	b.graphs.close()
	b.gdrv.destroyFence()
	b.graphs = nil
}
