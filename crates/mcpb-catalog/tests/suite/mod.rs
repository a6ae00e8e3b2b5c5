mod scan_corpus;
