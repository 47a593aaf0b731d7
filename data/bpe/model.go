package bpe

import (
	"fmt"
	"unicode/utf8"
)

// encodePiece appends the ids of one pre-token: the whole piece when ignore_merges is set and it is
// a token, else its characters merged by rank, each character left without a token replaced by its
// <0xNN> byte tokens (byte fallback) or unk.
func (t *Tokenizer) encodePiece(piece string, dst []int32) ([]int32, error) {
	if t.ignoreMerges {
		if id, ok := t.vocab[piece]; ok {
			return append(dst, id), nil
		}
	}
	cacheable := len(piece) <= maxCachedPiece
	if cacheable {
		t.cacheMu.Lock()
		ids, ok := t.cache[piece]
		t.cacheMu.Unlock()
		if ok {
			return append(dst, ids...), nil
		}
	}
	start := len(dst)
	dst, err := t.mergePiece(piece, dst)
	if err != nil {
		return nil, err
	}
	if cacheable {
		ids := append([]int32(nil), dst[start:]...)
		t.cacheMu.Lock()
		if len(t.cache) >= cacheCap {
			clear(t.cache)
		}
		t.cache[piece] = ids
		t.cacheMu.Unlock()
	}
	return dst, nil
}

// symbol is one node of the doubly linked list BPE merges: a token id (-1: a character without a
// token, kept from start to end in the piece) and its neighbours (-1: none).
type symbol struct {
	id         int32
	prev, next int32
	start, end int32 // byte span in the piece, for byte fallback of unknown characters
}

// candidate is a possible merge of the symbol at pos with its right neighbour; it is stale when
// either side has changed since it was queued.
type candidate struct {
	rank, pos   int32
	left, right int32 // the ids it was queued for
}

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergePiece runs BPE on the characters of piece: repeatedly the pair with the lowest rank, the
// leftmost among equals, is merged (the order of tokenizers and transformers.js). A binary heap
// of candidates keeps a long piece (a SentencePiece section is a whole text) at O(n log n).
func (t *Tokenizer) mergePiece(piece string, dst []int32) ([]int32, error) {
	syms := make([]symbol, 0, len(piece))
	for i := 0; i < len(piece); {
		r, size := utf8.DecodeRuneInString(piece[i:])
		id := int32(-1)
		if int(r) < len(t.lowRune) {
			id = t.lowRune[r]
		} else if v, ok := t.vocab[piece[i:i+size]]; ok {
			id = v
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1, start: int32(i), end: int32(i + size)})
		i += size
	}
	if len(syms) == 0 {
		return dst, nil
	}
	syms[len(syms)-1].next = -1

	if len(syms) > 1 {
		var h heap
		push := func(pos int32) {
			l, r := syms[pos].id, syms[syms[pos].next].id
			if l < 0 || r < 0 {
				return
			}
			if m, ok := t.merges[uint64(uint32(l))<<32|uint64(uint32(r))]; ok {
				h.push(candidate{rank: m.rank, pos: pos, left: l, right: r})
			}
		}
		for i := 0; i+1 < len(syms); i++ {
			push(int32(i))
		}
		for len(h) > 0 {
			c := h.pop()
			s := &syms[c.pos]
			if s.id != c.left || s.next < 0 || syms[s.next].id != c.right {
				continue // stale: a side was merged since this was queued
			}
			right := &syms[s.next]
			s.id = t.merges[uint64(uint32(c.left))<<32|uint64(uint32(c.right))].id
			s.end = right.end
			s.next = right.next
			right.id = -2 // dead
			if s.next >= 0 {
				syms[s.next].prev = c.pos
				push(c.pos)
			}
			if s.prev >= 0 {
				push(s.prev)
			}
		}
	}

	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 {
			dst = append(dst, s.id)
			continue
		}
		ch := piece[s.start:s.end]
		if t.byteFallback {
			ok := true
			for j := 0; j < len(ch); j++ {
				ok = ok && t.byteTok[ch[j]] >= 0
			}
			if ok {
				for j := 0; j < len(ch); j++ {
					dst = append(dst, t.byteTok[ch[j]])
				}
				continue
			}
		}
		if t.unk < 0 {
			return nil, fmt.Errorf("character %q has no token and the model has no unk_token", ch)
		}
		dst = append(dst, t.unk)
	}
	return dst, nil
}

// heap is a binary min-heap of candidates ordered by (rank, pos).
type heap []candidate

func (h *heap) push(c candidate) {
	*h = append(*h, c)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].less(a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *heap) pop() candidate {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].less(a[m]) {
			m = l
		}
		if r < n && a[r].less(a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
