package store

import "fmt"

// Text ids and their order. A store's text ids decide which side of the train/val split each text
// falls on (data.SplitOf) and which token rows go with which candidate embedding and text. In a
// store this package wrote (one with checksums in meta.json), Open holds them to what the Writer
// made, beyond the checksums, since a checksum recomputed after an edit (a resealed store) proves
// nothing about them:
//
//   - Both files list the texts in one order: the Writer appends a text's row to texts.arrow and
//     its token rows to tokens.arrow in the same call, so the k-th run of rows in tokens.arrow is
//     the text of row k of texts.arrow. A text_id swapped in one file between two texts of equal
//     length, which the run lengths cannot reveal, would otherwise pair one text's rows with the
//     other's embedding and text. (Stores of other tools, without checksums, may order texts.arrow
//     as they like; they open with a note that they are not verified.)
//   - meta.json records, for every record batch, its rows and its first and last text_id
//     (BatchChecksum); the batches must hold exactly those, so ids swapped across batches in both
//     files are refused unless meta.json was rewritten to match as well.
//   - meta.json's id_hash (idhash.go) binds every text_id, in order, to the checksums, so ids
//     exchanged inside a batch in both files are refused even with the checksums recomputed.

// checkWriterIDs checks a store with checksums against both rules above, naming the file, the
// rows or batch, and the text ids at fault.
func (s *Store) checkWriterIDs() error {
	cs := s.meta.Checksums
	if cs == nil {
		return nil
	}
	for i := 1; i < len(s.rowStart); i++ {
		if s.rowStart[i] < s.rowStart[i-1] {
			return fmt.Errorf("%s rows %d and %d (text_ids %d, %d) have their token rows in the opposite order in %s (from rows %d and %d): "+
				"the writer lists texts in one order in both files, so a text_id was changed in one of them",
				TextsFile, i-1, i, s.ids[i-1], s.ids[i], TokensFile, s.rowStart[i-1], s.rowStart[i])
		}
	}
	check := func(name string, fc FileChecksums, block, n int, first, last func() int64) error {
		if block >= len(fc.Batches) {
			return fmt.Errorf("%s: record batch %d: meta.json records only %d batches", name, block, len(fc.Batches))
		}
		b := fc.Batches[block]
		if b.Rows != int64(n) {
			return fmt.Errorf("%s: record batch %d holds %d rows, meta.json records %d", name, block, n, b.Rows)
		}
		if f, l := first(), last(); f != b.FirstTextID || l != b.LastTextID {
			return fmt.Errorf("%s: record batch %d holds text_ids %d..%d, meta.json records %d..%d: text ids changed after the store was written",
				name, block, f, l, b.FirstTextID, b.LastTextID)
		}
		return nil
	}
	// Only batches with rows are kept (an empty one records no ids, and Validate checks it).
	for _, tb := range s.tokens {
		if err := check(TokensFile, cs.Tokens, tb.block, tb.n,
			func() int64 { return tb.textID[0] }, func() int64 { return tb.textID[tb.n-1] }); err != nil {
			return err
		}
	}
	for _, tb := range s.texts {
		if err := check(TextsFile, cs.Texts, tb.block, tb.n,
			func() int64 { return s.ids[tb.start] }, func() int64 { return s.ids[tb.start+tb.n-1] }); err != nil {
			return err
		}
	}
	return nil
}
