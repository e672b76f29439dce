package pwevent.flink.membership;

import pwevent.flink.parsing.RequirementPayload;
import pwevent.flink.time.SlotRules;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Each user's ledger class from its requirement records (docs/streaming.md, "Topology"), keyed by
 * user: the host of {@link UserMembership} under {@link MembershipRule}.
 *
 * <p>Input 1: the requirements' {@link ValidTime#OUT} rows (user, time_ms, cell, partition, offset,
 * {@link RequirementPayload} bytes, ahead): a record is refused at once as {@code too_far_ahead} when
 * ValidTime's lead guard did not believe its time, and as {@code invalid_requirement} when no ledger
 * can run it (whatever its time: the rule refuses it whatever the user declared before); any other is
 * buffered until its slot closes, or refused as {@code late} if it already has. Input 2:
 * {@link FirstPresence#PRESENCE} rows (user, slot): it carries the
 * events' watermark, so that a requirement record is judged late against the events' progress and
 * its slot closes here no later than the events' slot does; with a default requirement also each
 * (user, slot) present without a class that Membership may still need. One event-time timer per
 * user and slot with something to apply, at the slot's last millisecond.
 *
 * <p>Output ({@link #OUT}, timed at the slot's last millisecond): a change of the user's class,
 * Row(user, cls, vms: the slot's first millisecond, slot, previous class or null, the class's
 * requirement as canonical JSON). Side output {@link #REJECTED}: Row(reason, detail, partition,
 * offset, original) of each record that did not apply, for its dead letter.
 */
public final class Membership extends KeyedCoProcessFunction<String, Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final RowTypeInfo OUT = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.STRING, Types.LONG, Types.LONG, Types.STRING, Types.STRING},
            new String[] {"user", "cls", "vms", "slot", "previous", "requirement"});
    public static final OutputTag<Row> REJECTED = new OutputTag<>("requirement records that did not apply",
            new RowTypeInfo(new TypeInformation<?>[] {Types.STRING, Types.STRING, Types.INT, Types.LONG,
                Types.PRIMITIVE_ARRAY(Types.BYTE)},
                new String[] {"reason", "detail", "partition", "offset", "original"}));

    private final MembershipRule rule;
    private final String tooFarAheadDetail;
    private final long originMs;
    private final long slotMs;
    private transient ValueState<byte[]> users;

    public Membership(MembershipRule rule, String tooFarAheadDetail, long originMs, long slotMs) {
        this.rule = rule;
        this.tooFarAheadDetail = tooFarAheadDetail;
        this.originMs = originMs;
        this.slotMs = slotMs;
    }

    /** Membership over `requirements` (the requirements' timed rows) and `presences`, both keyed by user. */
    public static SingleOutputStreamOperator<Row> apply(DataStream<Row> requirements, DataStream<Row> presences,
                                                        Membership membership) {
        return requirements.keyBy(new ByUser(), Types.STRING).connect(presences.keyBy(new ByUser(), Types.STRING))
                .process(membership, OUT);
    }

    @Override
    public void open(OpenContext context) {
        users = getRuntimeContext().getState(new ValueStateDescriptor<>("membership",
                PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement1(Row row, Context context, Collector<Row> out) throws Exception {
        long time = (Long) row.getField(1);
        int partition = (Integer) row.getField(3);
        long offset = (Long) row.getField(4);
        RequirementPayload payload = RequirementPayload.decode((byte[]) row.getField(5));
        if (Boolean.TRUE.equals(row.getField(6))) {
            context.output(REJECTED, Row.of(MembershipRule.TOO_FAR_AHEAD, tooFarAheadDetail, partition, offset,
                    payload.original()));
            return;
        }
        if (!payload.registers()) {  // no ledger can run it: refused whatever came before, so at once
            context.output(REJECTED, Row.of(MembershipRule.INVALID_REQUIREMENT, payload.detail(), partition, offset,
                    payload.original()));
            return;
        }
        long slot = SlotRules.slotOf(originMs, slotMs, time);
        UserMembership user = UserMembership.decode(users.value());
        UserMembership.Rejection late = user.receive(new UserMembership.Pending(slot, time, partition, offset, payload),
                context.timerService().currentWatermark(), originMs, slotMs);
        if (late != null) {
            context.output(REJECTED, rejected(late));
            return;
        }
        context.timerService().registerEventTimeTimer(lastMs(slot));
        users.update(user.encode());
    }

    @Override
    public void processElement2(Row row, Context context, Collector<Row> out) throws Exception {
        long slot = (Long) row.getField(1);
        UserMembership user = UserMembership.decode(users.value());
        if (user.seen(slot)) {
            context.timerService().registerEventTimeTimer(lastMs(slot));
            users.update(user.encode());
        }
    }

    @Override
    public void onTimer(long timestamp, OnTimerContext context, Collector<Row> out) throws Exception {
        String name = context.getCurrentKey();
        UserMembership user = UserMembership.decode(users.value());
        for (Object done : user.close(SlotRules.slotOf(originMs, slotMs, timestamp), name, rule)) {
            if (done instanceof MembershipRule.Change change) {
                out.collect(Row.of(name, change.target(), SlotRules.firstMs(originMs, slotMs, change.slot()),
                        change.slot(), change.previous(), change.requirement()));
            } else {
                context.output(REJECTED, rejected((UserMembership.Rejection) done));
            }
        }
        if (user.empty()) {
            users.clear();
        } else {
            users.update(user.encode());
        }
    }

    private long lastMs(long slot) {
        return SlotRules.lastMs(originMs, slotMs, slot);
    }

    private static Row rejected(UserMembership.Rejection rejection) {
        return Row.of(rejection.reason(), rejection.detail(), rejection.partition(), rejection.offset(),
                rejection.original());
    }
}
