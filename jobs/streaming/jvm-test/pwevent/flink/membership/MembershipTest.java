package pwevent.flink.membership;

import pwevent.flink.contract.Reasons;
import pwevent.flink.parsing.RequirementPayload;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.operators.co.KeyedCoProcessOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.apache.flink.types.Row;
import org.junit.jupiter.api.Test;

/**
 * The keyed {@link Membership} host (the rule itself: MembershipScenariosTest): a record waits for
 * its slot's end and comes out as a change timed at the slot's last millisecond; one whose slot the
 * watermark of both inputs had closed is {@code late}, one ValidTime did not believe
 * {@code too_far_ahead}; a presence registers a user with the default; state and timers survive a
 * restore.
 */
class MembershipTest {
    private static final long SLOT = 1_000;
    private static final String REQ = "{\"epsilon\":1.0,\"w\":10}";
    private static final String DEFAULT = "{\"epsilon\":2.0,\"w\":5}";

    static KeyedTwoInputStreamOperatorTestHarness<String, Row, Row, Row> harness(OperatorSubtaskState state)
            throws Exception {
        var membership = new Membership(new MembershipRule(false, "fixed", DEFAULT, DEFAULT), 0, SLOT);
        var harness = new KeyedTwoInputStreamOperatorTestHarness<String, Row, Row, Row>(
                new KeyedCoProcessOperator<>(membership), row -> (String) row.getField(0),
                row -> (String) row.getField(0), Types.STRING);
        harness.setup(Membership.OUT.createSerializer(harness.getExecutionConfig().getSerializerConfig()));
        if (state != null) {
            harness.initializeState(state);
        }
        harness.open();
        return harness;
    }

    /** The requirements' ValidTime row of `user` at `time` (offset `offset`), `ahead` as ValidTime says. */
    static StreamRecord<Row> record(String user, long time, long offset, boolean ahead) {
        byte[] original = ("r" + offset).getBytes(StandardCharsets.UTF_8);
        byte[] payload = new RequirementPayload(REQ, REQ, null, original).encode();
        return new StreamRecord<>(Row.of(user, time, null, 0, offset, payload, ahead), time);
    }

    static Row rejected(String reason, String detail, long offset) {
        return Row.of(reason, detail, 0, offset, ("r" + offset).getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void recordsWaitForTheirSlotLateAndAheadOnesAreRefused() throws Exception {
        OperatorSubtaskState state;
        try (var membership = harness(null)) {
            membership.processElement1(record("u1", 1_500, 1, false));  // slot 2
            membership.processElement1(record("u2", 1_600, 2, true));
            membership.processBothWatermarks(new Watermark(1_998));
            assertEquals(List.of(), membership.extractOutputValues(), "slot 2 not closed yet");
            assertEquals(List.of(rejected(Reasons.TOO_FAR_AHEAD, Reasons.TOO_FAR_AHEAD_DETAIL, 2)),
                    membership.getSideOutput(Membership.REJECTED).stream().map(StreamRecord::getValue).toList());
            state = membership.snapshot(1L, 1L);
        }
        try (var membership = harness(state)) {
            membership.processBothWatermarks(new Watermark(1_999));
            membership.processElement1(record("u3", 1_700, 3, false));  // slot 2 has closed
            membership.processElement2(new StreamRecord<>(Row.of("u4", 3L)));  // present without a class
            membership.processBothWatermarks(new Watermark(2_999));
            String root = MembershipRule.classId(null, null, REQ);
            assertEquals(List.of(new StreamRecord<>(Row.of("u1", root, 1_000L, 2L, null, REQ), 1_999),
                    new StreamRecord<>(Row.of("u4", MembershipRule.classId(null, null, DEFAULT), 2_000L, 3L, null,
                            DEFAULT), 2_999)),
                    membership.getOutput().stream().filter(o -> o instanceof StreamRecord).toList());
            assertEquals(List.of(rejected(Reasons.LATE, Reasons.lateRequirementDetail(2), 3)),
                    membership.getSideOutput(Membership.REJECTED).stream().map(StreamRecord::getValue).toList());
        }
    }

    @Test
    void aRequirementNoLedgerCanRunIsRefusedAtOnceWhateverItsTime() throws Exception {
        try (var membership = harness(null)) {
            byte[] invalid = new RequirementPayload("{\"epsilon\":500.0,\"w\":10}", null, "epsilon over the cap",
                    "r7".getBytes(StandardCharsets.UTF_8)).encode();
            long farAhead = 3_000_000;  // 50 minutes of one-second slots past the watermark
            membership.processElement1(
                    new StreamRecord<>(Row.of("u1", farAhead, null, 0, 7L, invalid, false), farAhead));
            assertEquals(List.of(rejected(Reasons.INVALID_REQUIREMENT, "epsilon over the cap", 7)),
                    membership.getSideOutput(Membership.REJECTED).stream().map(StreamRecord::getValue).toList(),
                    "before any watermark reaches its slot");
            membership.processBothWatermarks(new Watermark(Long.MAX_VALUE));
            assertEquals(List.of(), membership.extractOutputValues(), "it registers nobody");
        }
    }
}
