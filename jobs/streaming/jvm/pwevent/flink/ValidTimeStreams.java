package pwevent.flink;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.watermarkstatus.WatermarkStatus;
import org.apache.flink.types.Row;

/**
 * Where {@link ValidTime}'s two instances sit in the job graph (docs/streaming.md, "Time";
 * jobs/streaming/pyflink_internals.py builds them with these): the requirements' instance, the
 * events' instance, and the requirements' valid time as rows for the events' input 2.
 */
public final class ValidTimeStreams {
    private ValidTimeStreams() {
    }

    /**
     * The requirements' instance: `records` with their valid event time; `registrations` (how far
     * the requirements are read) are broadcast to every subtask. Its input 1 is
     * {@link RequirementOrder}'s one row per record, in offset order ({@link ValidTime#FAST} with the
     * record's {@link RequirementPayload} in `original`, {@link ValidTime#REFUSED} for a refusal),
     * every user known; with `backlogEnds`
     * (partition -> one past its last committed record when the job was built) a partition whose
     * latest record is the last one it held then stops holding the others back at once, as the
     * source does.
     */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> records, DataStream<Row> registrations,
                                                        ValidTime operator) {
        return records.connect(registrations.broadcast()).transform("valid event time", ValidTime.OUT, operator);
    }

    /** The events' instance: `events` with their valid event time, at their parallelism, on forward
     *  channels (each subtask times the partitions its source subtask reads); `requirementsTime`
     *  ({@link #timeOf}) broadcast to every subtask. */
    public static SingleOutputStreamOperator<Row> applyToEvents(DataStream<Row> events, DataStream<Row> requirementsTime,
                                                                ValidTime operator) {
        return events.connect(requirementsTime.broadcast()).transform("valid event time", ValidTime.OUT, operator)
                .setParallelism(events.getParallelism());
    }

    /** `timed`'s watermark, the smallest over its subtasks, as {@link Registrations#requirementsTime}
     *  rows of type `as` (input 2 of the events' instance, which follows that time while its own
     *  partitions are idle): `timed`'s rows stop in its own tasks ({@link WatermarksOnly}, chained),
     *  and one task turns the watermarks of all of them into rows, without any watermark or status of
     *  its own. */
    public static SingleOutputStreamOperator<Row> timeOf(DataStream<Row> timed, TypeInformation<Row> as) {
        return timed.transform("watermarks of", timed.getType(), new WatermarksOnly())
                .setParallelism(timed.getParallelism()).uid("requirement-watermarks-only")
                .transform("time of", as, new TimeRows()).setParallelism(1);
    }

    /** Drops every row, passes watermarks and statuses on. */
    static final class WatermarksOnly extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public void processElement(StreamRecord<Row> record) {
        }
    }

    /** {@link #timeOf}'s operator. */
    static final class TimeRows extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public void processElement(StreamRecord<Row> record) {
        }

        @Override
        public void processWatermark(Watermark mark) {
            if (mark.getTimestamp() != Long.MAX_VALUE) {
                output.collect(new StreamRecord<>(Registrations.requirementsTime(mark.getTimestamp())));
            }
        }

        @Override
        public void processWatermarkStatus(WatermarkStatus status) {
        }
    }
}
