package store

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/gelo-research/geloattack/internal/numfmt"
)

// scanChunk is how many token rows Validate checks between progress reports and cancellation
// checks.
const scanChunk = 4096

// Validate opens the store in dir, which re-checks everything Open checks, then verifies the
// checksum of every record batch of both files (a mismatch names the file, the batch, its rows and
// text ids, and both checksums) and scans every value: token embeddings and text embeddings must
// be finite, token ids non-negative, texts valid UTF-8, and null counts must agree with the
// validity bitmap. When a store with checksums does not even open, Open verifies its batches all
// the same, so that the error says which batch is damaged. progress, when not nil, is called with
// the token rows checked so far and the total.
func Validate(ctx context.Context, dir string, progress func(done, total int64)) error {
	_, err := ValidateNotes(ctx, dir, progress)
	return err
}

// ValidateNotes is Validate that also returns notes for the user when the store is valid: that a
// store written before checksums was scanned but could not be verified, or that one written
// before id hashes has its text ids checked per batch only.
func ValidateNotes(ctx context.Context, dir string, progress func(done, total int64)) ([]string, error) {
	s, err := Open(dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.scan(ctx, progress); err != nil {
		return nil, err
	}
	if s.meta.Checksums == nil {
		return []string{fmt.Sprintf("store %s: no checksums in %s (older store): every value was scanned (no NaN/Inf), but the data could not be verified against checksums; re-import it to add them",
			s.dir, MetaFile)}, nil
	}
	if s.meta.IDHash == "" {
		return []string{noIDHashNote(s.dir)}, nil
	}
	return nil, nil
}

// verifyBatch checks the checksum of record batch block of tokens.arrow (tokens) or texts.arrow;
// it does nothing for a store without checksums.
func (s *Store) verifyBatch(tokens bool, block int) error {
	cs := s.meta.Checksums
	if cs == nil {
		return nil
	}
	name, fc, data := TextsFile, cs.Texts, s.txt
	if tokens {
		name, fc, data = TokensFile, cs.Tokens, s.tok
	}
	if err := fc.verifyBatch(name, data, block); err != nil {
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	return nil
}

// verifyEmptyBatches checks the batches that hold no rows, which the row scans never visit.
func (s *Store) verifyEmptyBatches() error {
	cs := s.meta.Checksums
	if cs == nil {
		return nil
	}
	for _, f := range []struct {
		tokens  bool
		batches []BatchChecksum
	}{{true, cs.Tokens.Batches}, {false, cs.Texts.Batches}} {
		for i, b := range f.batches {
			if b.Rows == 0 {
				if err := s.verifyBatch(f.tokens, i); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *Store) scan(ctx context.Context, progress func(done, total int64)) error {
	if err := s.verifyEmptyBatches(); err != nil {
		return err
	}
	total := s.meta.NumTokens
	var done atomic.Int64
	errs := make([]error, len(s.tokens))
	var next atomic.Int64
	var firstBad atomic.Int64 // lowest batch with an error: later batches need no checking
	firstBad.Store(int64(len(s.tokens)))
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(s.tokens)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1) - 1)
				if b >= len(s.tokens) || int64(b) > firstBad.Load() {
					return
				}
				if err := s.scanBatch(ctx, b, &done); err != nil {
					errs[b] = err
					for cur := firstBad.Load(); int64(b) < cur && !firstBad.CompareAndSwap(cur, int64(b)); cur = firstBad.Load() {
					}
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	// Progress is reported from this goroutine only, so callers need no locking.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for wait := true; wait; {
		select {
		case <-finished:
			wait = false
		case <-tick.C:
			if progress != nil {
				progress(done.Load(), total)
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if progress != nil {
		progress(done.Load(), total)
	}
	return s.scanTexts()
}

// scanBatch checks every token row of batch b. It runs on its own goroutine, so it turns its own
// panics and memory faults (a file truncated under the map) into errors.
func (s *Store) scanBatch(ctx context.Context, b int, done *atomic.Int64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: %s: batch %d: corrupt or truncated data: %v", s.dir, TokensFile, b, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	tb := &s.tokens[b]
	// The checksum first: damage is then reported as such, with the batch's place, rather than
	// as the NaN or negative id it may have produced (named too, when there is one).
	if err := s.checkTokens(tb); err != nil {
		return err
	}
	d := s.meta.D
	for r0 := 0; r0 < tb.n; r0 += scanChunk {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store %s: validate: %w", s.dir, err)
		}
		r1 := min(r0+scanChunk, tb.n)
		for r := r0; r < r1; r++ {
			if j, v := firstNonFinite(tb, r, d); j >= 0 {
				return fmt.Errorf("store %s: %s: row %d (text_id %d, position %d): embedding[%d] = %v",
					s.dir, TokensFile, tb.start+int64(r), tb.textID[r], tb.pos[r], j, v)
			}
			if tb.tok[r] < 0 {
				return fmt.Errorf("store %s: %s: row %d (text_id %d, position %d): token_id = %d is negative",
					s.dir, TokensFile, tb.start+int64(r), tb.textID[r], tb.pos[r], tb.tok[r])
			}
		}
		done.Add(int64(r1 - r0))
	}
	return nil
}

// scanTexts checks texts.arrow: finite embeddings, valid UTF-8, null counts.
func (s *Store) scanTexts() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store %s: %s: corrupt or truncated data: %v", s.dir, TextsFile, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	e := s.meta.E
	for _, tb := range s.texts {
		if err := s.checkTexts(&tb); err != nil {
			return err
		}
		nulls := 0
		for r := 0; r < tb.n; r++ {
			i := tb.start + r
			for j, v := range tb.emb[r*e : (r+1)*e] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("store %s: %s: row %d (text_id %d): embedding[%d] = %v", s.dir, TextsFile, i, s.ids[i], j, v)
				}
			}
			if tb.valid != nil && tb.valid[r/8]&(1<<(r%8)) == 0 {
				nulls++
				continue
			}
			if !utf8.Valid(tb.data[tb.offsets[r]:tb.offsets[r+1]]) {
				return fmt.Errorf("store %s: %s: row %d (text_id %d): text is not valid UTF-8", s.dir, TextsFile, i, s.ids[i])
			}
		}
		if int64(nulls) != tb.nulls {
			return fmt.Errorf("store %s: %s: rows [%d, %d): field \"text\": null count %d, validity bitmap has %d nulls",
				s.dir, TextsFile, tb.start, tb.start+tb.n, tb.nulls, nulls)
		}
	}
	return nil
}

// firstNonFinite returns the first non-finite value of row r of a tokens batch, or -1.
func firstNonFinite(tb *tokenBatch, r, d int) (int, float32) {
	if tb.emb16 != nil {
		row := tb.emb16[r*d : (r+1)*d]
		if j := firstNonFinite16(row); j >= 0 {
			return j, numfmt.F16ToF32(row[j])
		}
		return -1, 0
	}
	row := tb.emb32[r*d : (r+1)*d]
	if j := firstNonFinite32(row); j >= 0 {
		return j, row[j]
	}
	return -1, 0
}

// firstNonFinite16 is the index of the first binary16 Inf or NaN of vals, or -1.
func firstNonFinite16(vals []uint16) int {
	// An all-ones exponent (Inf or NaN) is the only one that carries into bit 15 of its lane
	// here; four lanes per 64-bit word keep the all-finite case fast and branch-free.
	const exp4, one4, top4 = 0x7c007c007c007c00, 0x0400040004000400, 0x8000800080008000
	var flag uint64
	j := 0
	if uintptr(unsafe.Pointer(unsafe.SliceData(vals)))%8 == 0 {
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)/4)
		for _, w := range words {
			flag |= (w&exp4 + one4) & top4
		}
		j = 4 * len(words)
	}
	for _, h := range vals[j:] {
		flag |= uint64((h&0x7c00 + 0x0400) & 0x8000)
	}
	if flag == 0 {
		return -1
	}
	for j, h := range vals {
		if h&0x7c00 == 0x7c00 {
			return j
		}
	}
	return -1
}

// firstNonFinite32 is the index of the first Inf or NaN of vals, or -1.
func firstNonFinite32(vals []float32) int {
	// As in firstNonFinite16, with two lanes per 64-bit word: only an all-ones exponent carries
	// into the lane's sign bit.
	const exp2, one2, top2 = 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000
	var flag uint64
	j := 0
	if uintptr(unsafe.Pointer(unsafe.SliceData(vals)))%8 == 0 {
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)/2)
		for _, w := range words {
			flag |= (w&exp2 + one2) & top2
		}
		j = 2 * len(words)
	}
	for _, v := range vals[j:] {
		flag |= uint64((math.Float32bits(v)&0x7f800000 + 0x00800000) & 0x80000000)
	}
	if flag == 0 {
		return -1
	}
	for j, v := range vals {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return j
		}
	}
	return -1
}
