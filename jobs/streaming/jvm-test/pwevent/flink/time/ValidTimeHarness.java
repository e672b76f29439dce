package pwevent.flink.time;

import pwevent.flink.contract.TimePaths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;

/** Flink's operator test harness around a {@link ValidTime} subtask, and what the tests read of it. */
final class ValidTimeHarness {
    static final long SLOT = 60_000L;
    static final long LEAD = 3_600_000L;

    private ValidTimeHarness() {
    }

    /** Out-of-orderness 0, lead guard of an hour, release delay `delayMs`, the topic's partitions
     *  ending at `ends` (each subtask given those it owns). */
    static ValidTime operator(long delayMs, Map<Integer, Long> ends) {
        return new ValidTime(0, LEAD, delayMs, Long.MIN_VALUE, new FixedEnds(ends));
    }

    /** {@link PartitionEnds} that do not change. */
    static final class FixedEnds implements PartitionEnds {
        private static final long serialVersionUID = 1L;
        private final HashMap<Integer, Long> ends;

        FixedEnds(Map<Integer, Long> ends) {
            this.ends = new HashMap<>(ends);
        }

        @Override
        public Map<Integer, Long> owned(int subtask, int subtasks, boolean restored) {
            Map<Integer, Long> mine = new HashMap<>();
            ends.forEach((partition, end) -> {
                if (PartitionTimes.owns(partition, subtasks) == subtask) {
                    mine.put(partition, end);
                }
            });
            return mine;
        }
    }

    static OneInputStreamOperatorTestHarness<Row, Row> harness(ValidTime operator) throws Exception {
        return harness(operator, 1, 0);
    }

    /** Subtask `index` of `parallelism`. */
    static OneInputStreamOperatorTestHarness<Row, Row> harness(ValidTime operator, int parallelism, int index)
            throws Exception {
        OneInputStreamOperatorTestHarness<Row, Row> harness =
                new OneInputStreamOperatorTestHarness<>(operator, 128, parallelism, index);
        harness.getExecutionConfig().setAutoWatermarkInterval(100);
        harness.setup(ValidTime.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        return harness;
    }

    /** A fast-path event of `user` at `time`, at `offset` of `partition`. */
    static StreamRecord<Row> event(String user, long time, int partition, long offset) {
        return new StreamRecord<>(Row.of(user, time, 0, partition, offset, new byte[0], TimePaths.FAST), time);
    }

    /** (offset, ahead) of each row that came out, in order. */
    static List<List<Object>> judged(List<Object> output) {
        List<List<Object>> rows = new ArrayList<>();
        for (Object item : output) {
            if (item instanceof StreamRecord<?> record) {
                Row row = (Row) record.getValue();
                rows.add(List.of(row.getField(4), row.getField(6)));
            }
        }
        return rows;
    }

    /** The watermarks that came out, in order. */
    static List<Long> watermarks(List<Object> output) {
        List<Long> marks = new ArrayList<>();
        for (Object item : output) {
            if (item instanceof Watermark mark) {
                marks.add(mark.getTimestamp());
            }
        }
        return marks;
    }

    /** The last watermark that came out (Long.MIN_VALUE: none). */
    static long last(OneInputStreamOperatorTestHarness<Row, Row> harness) {
        List<Long> marks = watermarks(List.copyOf(harness.getOutput()));
        return marks.isEmpty() ? Long.MIN_VALUE : marks.get(marks.size() - 1);
    }
}
