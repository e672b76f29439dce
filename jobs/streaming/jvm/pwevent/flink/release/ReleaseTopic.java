package pwevent.flink.release;

import java.io.Serializable;
import java.util.List;
import java.util.Map;

/**
 * Where {@link ReleaseWriter} writes: the release topic and, in the same transactions, the audit
 * topic, one transaction per call of {@link #write} (docs/streaming.md, "A slot's outcome is drawn
 * once"). {@link KafkaReleaseTopic} is the real one;
 * the JUnit tests use one in memory.
 */
interface ReleaseTopic extends AutoCloseable {
    /** Makes a topic at the writer's task (serialised with the job graph). */
    interface Factory extends Serializable {
        /** A topic ready to write: any transaction a previous writer of the same transactional id left
         *  open is aborted, and that writer can write no more. */
        ReleaseTopic open() throws Unavailable;
    }

    /** The topic could not be reached in time: nothing is known to be written; try again later. */
    final class Unavailable extends Exception {
        private static final long serialVersionUID = 1L;

        Unavailable(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The records keyed by a slot at or after `fromSlot`, slot -> values in offset order: only the
     *  committed ones (`committed`), or every record any reader can see, aborted ones included. */
    Map<Long, List<byte[]>> recordsFrom(long fromSlot, boolean committed) throws Unavailable;

    /** `releases` and their lines in one transaction, committed before this returns. */
    void write(List<ReleaseLog.Release> releases) throws Unavailable;

    @Override
    void close();
}
