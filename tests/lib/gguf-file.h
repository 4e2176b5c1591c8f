/*
 * gguf-file.h - a GGUF file written for a test from src/formats' writer.
 */
#ifndef QG_TESTS_GGUF_FILE_H
#define QG_TESTS_GGUF_FILE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "gguf.h"

/*
 * Finish WR unless R (the first error of the calls that filled it) is set,
 * free WR, and write the file to PATH, readable by every user (a daemon
 * under test may read it as another).  0, R, or the writer's or the
 * file's -errno.
 */
__attribute__((unused))
static int gguf_file_save(struct qg_gguf_writer *wr, int r, const char *path)
{
	void *buf = NULL;
	size_t len = 0;

	if (!r)
		r = qg_gguf_writer_finish(wr, &buf, &len);
	qg_gguf_writer_free(wr);
	FILE *f = r ? NULL : fopen(path, "wb");
	if (!r && (!f || fwrite(buf, 1, len, f) != len))
		r = -EIO;
	if (f && fclose(f) && !r)
		r = -EIO;
	free(buf);
	if (!r)
		chmod(path, 0644);
	return r;
}

#endif /* QG_TESTS_GGUF_FILE_H */
