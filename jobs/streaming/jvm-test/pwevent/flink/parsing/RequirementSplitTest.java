package pwevent.flink.parsing;

import pwevent.flink.contract.TimePaths;
import pwevent.flink.time.ValidTime;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.apache.flink.streaming.api.operators.ProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * RequirementSplit: a requirement the fast path accepted goes on with its payload (the requested and
 * ledger requirements, the record's bytes); any other record leaves a mark in its place on the same
 * channel, in order, and goes to the reference parser with its value, position and Kafka timestamp.
 */
class RequirementSplitTest {
    private static final String REQUESTED = "{\"epsilon\":1.0,\"w\":10}";
    private static final String LEDGER = "{\"epsilon\":0.5,\"w\":10}";

    @Test
    void eachRecordIsARequirementOrAMarkInOrderAndTheOthersGoToTheParser() throws Exception {
        var split = new OneInputStreamOperatorTestHarness<Row, Row>(
                new ProcessOperator<>(new RequirementSplit(Pseudonyms.none())));
        split.setup(ValidTime.IN.createSerializer(split.getExecutionConfig().getSerializerConfig()));
        split.open();
        byte[] good = {'{', '}'};
        byte[] bad = {0, 1};
        split.processElement(new StreamRecord<>(Row.of("u1", 60_000L, REQUESTED, LEDGER, 1, 10L, good, true, 5L), 5L));
        split.processElement(new StreamRecord<>(Row.of(null, null, null, null, 1, 11L, bad, false, 6L), 6L));
        split.processElement(new StreamRecord<>(Row.of(null, null, null, null, 1, 12L, good, null, 7L), 7L));
        List<Row> out = split.extractOutputValues();
        assertEquals(List.of(Row.of(null, null, null, 1, 11L, null, TimePaths.PENDING),
                Row.of(null, null, null, 1, 12L, null, TimePaths.PENDING)), out.subList(1, 3));
        Row accepted = out.get(0);
        assertEquals(List.of("u1", 60_000L, 1, 10L, TimePaths.FAST), List.of(accepted.getField(0),
                accepted.getField(1), accepted.getField(3), accepted.getField(4), accepted.getField(6)));
        assertEquals(null, accepted.getField(2), "no cell");
        RequirementPayload payload = RequirementPayload.decode((byte[]) accepted.getField(5));
        assertEquals(List.of(REQUESTED, LEDGER), List.of(payload.requested(), payload.ledger()));
        assertEquals(null, payload.detail());
        assertArrayEquals(good, payload.original());
        assertEquals(List.of(Row.of(bad, 1, 11L, 6L), Row.of(good, 1, 12L, 7L)),
                split.getSideOutput(RequirementSplit.SLOW).stream().map(StreamRecord::getValue).toList());
        split.close();
    }
}
