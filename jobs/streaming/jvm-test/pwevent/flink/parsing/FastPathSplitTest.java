package pwevent.flink.parsing;

import pwevent.flink.contract.TimePaths;
import pwevent.flink.time.ValidTime;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.apache.flink.streaming.api.operators.ProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * FastPathSplit (docs/streaming.md, "Parsing"): a record the fast path accepted goes on as an event;
 * any other leaves a mark in its place on the same channel, in order, and goes to the reference
 * parser with its value, position and Kafka timestamp.
 */
class FastPathSplitTest {
    @Test
    void eachRecordIsAnEventOrAMarkInOrderAndTheOthersGoToTheParser() throws Exception {
        var split = new OneInputStreamOperatorTestHarness<Row, Row>(
                new ProcessOperator<>(new FastPathSplit(Pseudonyms.none())));
        split.setup(ValidTime.IN.createSerializer(split.getExecutionConfig().getSerializerConfig()));
        split.open();
        byte[] good = {'{', '}'};
        byte[] bad = {0, 1};
        split.processElement(new StreamRecord<>(Row.of("u1", 60_000L, 3, 1, 10L, good, true, 5L), 60_000L));
        split.processElement(new StreamRecord<>(Row.of(null, null, null, 1, 11L, bad, false, 6L), 60_000L));
        split.processElement(new StreamRecord<>(Row.of("u2", 60_001L, 4, 1, 12L, good, true, null), 60_001L));
        assertEquals(List.of(Row.of("u1", 60_000L, 3, 1, 10L, good, TimePaths.FAST),
                Row.of(null, null, null, 1, 11L, null, TimePaths.PENDING),
                Row.of("u2", 60_001L, 4, 1, 12L, good, TimePaths.FAST)), split.extractOutputValues());
        assertEquals(List.of(Row.of(bad, 1, 11L, 6L)),
                split.getSideOutput(FastPathSplit.SLOW).stream().map(StreamRecord::getValue).toList());
        split.close();
    }
}
