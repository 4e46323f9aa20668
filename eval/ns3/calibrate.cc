// One condition of the `calibrate-tcp` scenario (eval/scenarios/calibrate-tcp.toml) through
// ns-3's TCP models, measured the way the kernel testbed measures (datapath/src/kernel/testbed),
// printed as one row of `results.csv` (eval/src/results.rs). docs/calibration-ns3.md says
// how the rows compare with the kernel's.
//
// The path is the testbed's:
//
//   sender ==[access: 10 Gbit/s, rtt/2 each way, random loss on arrival at the router]== router
//   router ==[bottleneck: the condition's rate towards the receiver, drop-tail queue]== receiver
//
// - Rate: the testbed's htb counts whole Ethernet frames (1514 bytes for a full segment); an
//   ns-3 point-to-point frame here is 1490 bytes (1448 of payload, 20 of TCP, 20 of IP, 2 of
//   PPP: no TCP timestamps, see below), so the bottleneck's DataRate is scaled by 1490/1514 and
//   a full segment takes exactly the testbed's serialization time.
// - Buffer: the testbed's bfifo holds floor(buffer_bytes / 1514) full frames; the bottleneck
//   device's DropTailQueue holds that many packets and nothing else queues there (the traffic
//   control layer is removed from that device). As on htb, the frame being serialized has
//   left the queue.
// - Delay: half the RTT on each direction of the access link (the testbed's relay holds each
//   frame for its direction's one-way delay; the bottleneck link has no propagation delay).
// - Loss: an error model on the router's access interface drops data-direction packets before
//   they reach the bottleneck queue, as the testbed's relay drops frames before the router's
//   qdisc; the ACK direction is never dropped. By default it is the testbed's own draw: one
//   `chance(loss)` per TCP segment that carries data, from the relay's generator (xoshiro256++
//   seeded by SplitMix64, `Rng::derive(seed, 1)` of datapath/src/sim/rng.rs, reproduced
//   below); the SYN and pure ACKs are never dropped and take no draw. So seed N drops the
//   same data segments (the k-th sent, retransmissions included) as the kernel run and the
//   simulator with seed N. `--rateErrorModel` uses ns-3's RateErrorModel (per packet, ns-3's
//   own random stream) instead.
// - TCP: Linux's defaults where ns-3 has them: MSS 1448, initial window 10, SACK, window
//   scaling, delayed ACKs (one ACK per two segments, 40 ms timer: Linux's TCP_DELACK_MIN; ns-3
//   has no quick-ack mode), 200 ms minimum RTO, PRR in recovery (RFC 6937, Linux's), limited
//   transmit, send and receive buffers of 16 MB (the window is never limited by them), no ECN.
//   TCP timestamps are off: ns-3's timestamp clock ticks in milliseconds and its RTT samples
//   would then be whole milliseconds, 2-5 % of the 20 ms paths; without timestamps ns-3 takes
//   RTT samples from segments' send times (Karn's rule), as Linux's seq_rtt does.
// - Measurement (datapath/src/kernel/testbed/transfer.rs): the sender writes for `duration`
//   seconds from the end of the handshake, then resets the connection (SO_LINGER 0). The
//   receiver counts the in-order bytes that arrive before the reset, which follows the data
//   already in the path (the relay and the qdisc are FIFO); here the count is taken when a
//   packet the sender sent at the end would reach the receiver (one-way delay plus the
//   bottleneck queue's backlog at that time). Utilization is those bytes over `duration` and
//   the nominal rate; every 10 ms the sender's smoothed RTT (RFC 6298, gain 1/8: ns-3's
//   RttMeanDeviation, as the kernel's `tcpi_rtt`) is sampled, and its 95th percentile
//   (nearest rank) is both `p95_srtt_ms` and `p95_rtt_ms`, as on the kernel; loss is
//   retransmitted over sent data segments (`tcpi_total_retrans / tcpi_data_segs_out`).
//
// Usage: calibrate --condition=ID --scheme=NAME --model=TcpCubic --seed=1 --bwMbps=10
//          --rttMs=20 --bufferBytes=12500 --loss=0.01 --duration=20 [--header]
// The row goes to stdout (with the CSV header first under --header).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/ppp-header.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

// datapath/src/sim/rng.rs: xoshiro256++ seeded by SplitMix64.
class Rng
{
  public:
    static Rng Derive(uint64_t seed, uint64_t stream)
    {
        return Rng(seed ^ (stream * 0xd6e8feb86659fd93ULL));
    }

    explicit Rng(uint64_t seed)
    {
        uint64_t x = seed;
        for (auto& w : m_s)
        {
            x += 0x9e3779b97f4a7c15ULL;
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            w = z ^ (z >> 31);
        }
    }

    uint64_t NextU64()
    {
        uint64_t* s = m_s;
        uint64_t result = Rotl(s[0] + s[3], 23) + s[0];
        uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = Rotl(s[3], 45);
        return result;
    }

    double NextF64()
    {
        return static_cast<double>(NextU64() >> 11) * (1.0 / static_cast<double>(1ULL << 53));
    }

    bool Chance(double p)
    {
        return p > 0.0 && NextF64() < p;
    }

  private:
    static uint64_t Rotl(uint64_t x, int k)
    {
        return (x << k) | (x >> (64 - k));
    }

    uint64_t m_s[4];
};

} // namespace

namespace ns3
{

// The testbed relay's random loss as an ns-3 error model: one draw per data-carrying TCP
// segment (the packet still has its PPP header where the device's receive error model sees it).
class TestbedLoss : public ErrorModel
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::TestbedLoss")
                                .SetParent<ErrorModel>()
                                .SetGroupName("Network")
                                .AddConstructor<TestbedLoss>();
        return tid;
    }

    void Configure(uint64_t seed, double loss)
    {
        m_rng = ::Rng::Derive(seed, 1);
        m_loss = loss;
    }

  private:
    bool DoCorrupt(Ptr<Packet> p) override
    {
        return m_loss > 0.0 && CarriesData(p) && m_rng.Chance(m_loss);
    }

    static bool CarriesData(Ptr<Packet> p)
    {
        Ptr<Packet> q = p->Copy();
        PppHeader ppp;
        Ipv4Header ip;
        TcpHeader tcp;
        if (q->RemoveHeader(ppp) == 0 || ppp.GetProtocol() != 0x0021 || q->RemoveHeader(ip) == 0 ||
            ip.GetProtocol() != 6 || q->PeekHeader(tcp) == 0)
        {
            return false;
        }
        return ip.GetPayloadSize() > tcp.GetSerializedSize();
    }

    void DoReset() override
    {
    }

    ::Rng m_rng{0};
    double m_loss = 0.0;
};

NS_OBJECT_ENSURE_REGISTERED(TestbedLoss);

} // namespace ns3

namespace
{

// Bytes of a full-size frame on the testbed (1448 + 32 of TCP with timestamps + 20 + 14).
constexpr double kTestbedFrameBytes = 1514.0;
// Bytes of a full-size frame here: 1448 + 20 (TCP) + 20 (IP) + 2 (PPP).
constexpr double kNs3FrameBytes = 1490.0;
constexpr uint32_t kMss = 1448;
constexpr uint16_t kPort = 5000;
const Time kSampleInterval = MilliSeconds(10);

// The results.csv columns (eval/src/results.rs, FlowRow), in order.
const char* kHeader =
    "scenario,env,condition,bw_mbps,rtt_ms,loss,buffer_bytes,scheme,seed,flow,role,flow_scheme,"
    "size_bytes,start_s,throughput_mbps,utilization,mean_rtt_ms,p95_rtt_ms,p95_srtt_ms,"
    "mean_qdelay_ms,p95_qdelay_ms,loss_rate,fct_s,reward,power,jain,retransmits,timeouts,"
    "fallback_s,takeovers,objective,score,status";

struct Flow
{
    Ptr<TcpSocketBase> socket;
    Ptr<RttMeanDeviation> rtt;
    Ptr<PacketSink> sink;
    Ptr<Queue<Packet>> bottleneckQueue;
    DataRate bottleneckRate;
    Time oneWay;
    Time duration;
    bool connected = false;
    bool sending = false;
    Time connectedAt;
    std::vector<double> srttUs;
    // Sequence space: highest byte sent so far (relative to the ISN), for telling
    // retransmissions from new data.
    bool haveIsn = false;
    uint32_t isn = 0;
    uint64_t highSent = 0;
    uint64_t dataSegsOut = 0;
    uint64_t retransSegs = 0;
    uint64_t timeouts = 0;
    uint64_t rxBytes = 0;
    bool done = false;
    // --series: the sender's state every 10 ms.
    std::ofstream* series = nullptr;
    uint32_t cwnd = 0;
    uint32_t inflight = 0;
    double lastRttMs = 0.0;
    int congState = 0;
    double pacingMbps = 0.0;
};

Flow g;

void
Fill(Ptr<Socket> s, uint32_t)
{
    if (!g.sending)
    {
        return;
    }
    while (s->GetTxAvailable() >= kMss)
    {
        uint32_t n = std::min<uint32_t>(s->GetTxAvailable() / kMss, 64) * kMss;
        if (s->Send(Create<Packet>(n)) < 0)
        {
            break;
        }
    }
}

void
Sample()
{
    if (!g.sending)
    {
        return;
    }
    if (g.rtt->GetNSamples() > 0)
    {
        g.srttUs.push_back(g.rtt->GetEstimate().GetMicroSeconds());
    }
    if (g.series)
    {
        *g.series << Simulator::Now().GetSeconds() << "," << g.cwnd << "," << g.inflight << ","
                  << g.rtt->GetEstimate().GetMicroSeconds() / 1e3 << "," << g.lastRttMs << ","
                  << g.sink->GetTotalRx() << "," << g.bottleneckQueue->GetNPackets() << ","
                  << g.dataSegsOut << "," << g.retransSegs << "," << g.congState << ","
                  << g.pacingMbps << "\n";
    }
    Simulator::Schedule(kSampleInterval, &Sample);
}

void
Count()
{
    g.rxBytes = g.sink->GetTotalRx();
    g.done = true;
    Simulator::Stop();
}

void
End()
{
    // The last sample, as the kernel sampler's `finish`.
    if (g.rtt->GetNSamples() > 0)
    {
        g.srttUs.push_back(g.rtt->GetEstimate().GetMicroSeconds());
    }
    g.sending = false;
    // The reset leaves now and reaches the router one one-way delay later; there it waits
    // behind the bottleneck's backlog.
    Simulator::Schedule(g.oneWay, [] {
        double backlogBits = 8.0 * (g.bottleneckQueue->GetNBytes() + kNs3FrameBytes);
        Time drain = Seconds(backlogBits / g.bottleneckRate.GetBitRate());
        Simulator::Schedule(drain, &Count);
    });
}

void
Connected(Ptr<Socket> s)
{
    g.connected = true;
    g.connectedAt = Simulator::Now();
    g.sending = true;
    Fill(s, 0);
    Sample();
    Simulator::Schedule(g.duration, &End);
}

void
ConnectFailed(Ptr<Socket>)
{
    std::cerr << "calibrate: the connection failed" << std::endl;
}

void
Tx(Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    uint8_t flags = h.GetFlags();
    if (flags & TcpHeader::SYN)
    {
        g.haveIsn = true;
        g.isn = h.GetSequenceNumber().GetValue() + 1;
        return;
    }
    if (!g.sending || p->GetSize() == 0 || !g.haveIsn)
    {
        return;
    }
    // 32-bit sequence numbers; 20 s at these rates stays far below 4 GB.
    uint64_t start = static_cast<uint32_t>(h.GetSequenceNumber().GetValue() - g.isn);
    uint64_t end = start + p->GetSize();
    g.dataSegsOut++;
    if (start < g.highSent)
    {
        g.retransSegs++;
    }
    g.highSent = std::max(g.highSent, end);
}

void
Cwnd(uint32_t, uint32_t v)
{
    g.cwnd = v;
}

void
Inflight(uint32_t, uint32_t v)
{
    g.inflight = v;
}

void
Pacing(DataRate, DataRate v)
{
    g.pacingMbps = v.GetBitRate() / 1e6;
}

void
LastRtt(Time, Time v)
{
    g.lastRttMs = v.GetMicroSeconds() / 1e3;
}

void
CongState(TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to)
{
    g.congState = to;
    if (g.sending && to == TcpSocketState::CA_LOSS && from != TcpSocketState::CA_LOSS)
    {
        g.timeouts++;
    }
}

void
Start(Ptr<Node> sender, Ipv4Address dest)
{
    Ptr<Socket> s = Socket::CreateSocket(sender, TcpSocketFactory::GetTypeId());
    g.socket = DynamicCast<TcpSocketBase>(s);
    NS_ABORT_MSG_IF(!g.socket, "not a TcpSocketBase");
    g.rtt = CreateObject<RttMeanDeviation>();
    g.socket->SetRtt(g.rtt);
    g.socket->TraceConnectWithoutContext("Tx", MakeCallback(&Tx));
    g.socket->TraceConnectWithoutContext("CongState", MakeCallback(&CongState));
    if (g.series)
    {
        g.socket->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&Cwnd));
        g.socket->TraceConnectWithoutContext("BytesInFlight", MakeCallback(&Inflight));
        g.socket->TraceConnectWithoutContext("RTT", MakeCallback(&LastRtt));
        g.socket->TraceConnectWithoutContext("PacingRate", MakeCallback(&Pacing));
    }
    s->SetConnectCallback(MakeCallback(&Connected), MakeCallback(&ConnectFailed));
    s->SetSendCallback(MakeCallback(&Fill));
    s->Bind();
    s->Connect(InetSocketAddress(dest, kPort));
}

// Nearest rank, as datapath/src/stats.rs.
double
Percentile(std::vector<double> v, unsigned perMille)
{
    if (v.empty())
    {
        return 0.0;
    }
    std::sort(v.begin(), v.end());
    size_t rank = (v.size() * perMille + 999) / 1000;
    rank = std::max<size_t>(1, std::min(rank, v.size()));
    return v[rank - 1];
}

double
Mean(const std::vector<double>& v)
{
    if (v.empty())
    {
        return 0.0;
    }
    double s = 0.0;
    for (double x : v)
    {
        s += x;
    }
    return s / v.size();
}

std::string
Num(double x)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string scenario = "calibrate-tcp";
    std::string env = "calibrate";
    std::string condition;
    std::string scheme;
    std::string model;
    uint32_t seed = 1;
    double bwMbps = 0.0;
    double rttMs = 0.0;
    uint64_t bufferBytes = 0;
    double loss = 0.0;
    double durationS = 20.0;
    bool header = false;
    std::string seriesPath;
    uint32_t delAckCount = 2;
    bool rateErrorModel = false;
    uint32_t rngCheck = 0;

    CommandLine cmd(__FILE__);
    cmd.AddValue("scenario", "scenario name (results.csv)", scenario);
    cmd.AddValue("env", "environment label (results.csv)", env);
    cmd.AddValue("condition", "condition id (results.csv)", condition);
    cmd.AddValue("scheme", "scheme name (results.csv)", scheme);
    cmd.AddValue("model", "ns-3 congestion control: TcpNewReno, TcpLinuxReno, TcpCubic, TcpBbr",
                 model);
    cmd.AddValue("seed", "seed (ns-3 run number)", seed);
    cmd.AddValue("bwMbps", "bottleneck rate, Mbit/s of Ethernet frames", bwMbps);
    cmd.AddValue("rttMs", "base RTT, ms", rttMs);
    cmd.AddValue("bufferBytes", "bottleneck buffer, bytes of 1514-byte frames", bufferBytes);
    cmd.AddValue("loss", "random loss probability of data-direction packets", loss);
    cmd.AddValue("duration", "seconds the sender writes after the handshake", durationS);
    cmd.AddValue("header", "print the CSV header first", header);
    cmd.AddValue("rateErrorModel",
                 "draw random loss from ns-3's RateErrorModel instead of the testbed's generator",
                 rateErrorModel);
    cmd.AddValue("rngCheck",
                 "print this many draws of the loss generator for --seed (next_u64) and exit",
                 rngCheck);
    cmd.AddValue("delAckCount",
                 "segments per ACK at the receiver (2: delayed ACKs as Linux; 1: an ACK per "
                 "segment)",
                 delAckCount);
    cmd.AddValue("series",
                 "write the sender's state every 10 ms to this CSV file (t_s, cwnd_bytes, "
                 "inflight_bytes, srtt_ms, last_rtt_ms, rx_bytes, queue_pkts, data_segs_out, "
                 "retrans_segs, ca_state, pacing_mbps)",
                 seriesPath);
    cmd.Parse(argc, argv);

    if (rngCheck > 0)
    {
        Rng r = Rng::Derive(seed, 1);
        for (uint32_t i = 0; i < rngCheck; i++)
        {
            std::cout << r.NextU64() << "\n";
        }
        return 0;
    }

    std::string bad;
    if (condition.empty() || scheme.empty())
    {
        bad = "--condition and --scheme are required";
    }
    else if (!(bwMbps > 0.0) || !(rttMs > 0.0) || !(durationS > 0.0))
    {
        bad = "--bwMbps, --rttMs and --duration must be positive";
    }
    else if (!(loss >= 0.0 && loss < 1.0))
    {
        bad = "--loss must be in [0, 1)";
    }
    else if (bufferBytes < static_cast<uint64_t>(kTestbedFrameBytes))
    {
        bad = "--bufferBytes must hold one 1514-byte frame";
    }
    else if (delAckCount < 1)
    {
        bad = "--delAckCount must be at least 1";
    }
    else if (model != "TcpNewReno" && model != "TcpLinuxReno" && model != "TcpCubic" &&
             model != "TcpBbr")
    {
        bad = "--model must be TcpNewReno, TcpLinuxReno, TcpCubic or TcpBbr, got '" + model + "'";
    }
    if (!bad.empty())
    {
        std::cerr << "calibrate: " << bad << std::endl;
        return 2;
    }

    std::ofstream seriesFile;
    if (!seriesPath.empty())
    {
        seriesFile.open(seriesPath);
        if (!seriesFile)
        {
            std::cerr << "calibrate: cannot write " << seriesPath << std::endl;
            return 2;
        }
        seriesFile << "t_s,cwnd_bytes,inflight_bytes,srtt_ms,last_rtt_ms,rx_bytes,queue_pkts,"
                      "data_segs_out,retrans_segs,ca_state,pacing_mbps\n";
        g.series = &seriesFile;
    }

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                       TypeIdValue(TypeId::LookupByName("ns3::" + model)));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TypeId::LookupByName("ns3::TcpPrrRecovery")));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(kMss));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(MilliSeconds(40)));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(16 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(16 << 20));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(true));
    // BBR paces (Linux's BBR asks the stack for pacing); Reno and Cubic do not.
    Config::SetDefault("ns3::TcpSocketState::EnablePacing", BooleanValue(model == "TcpBbr"));

    NodeContainer nodes;
    nodes.Create(3);
    Ptr<Node> sender = nodes.Get(0);
    Ptr<Node> router = nodes.Get(1);
    Ptr<Node> receiver = nodes.Get(2);

    Time oneWay = MicroSeconds(static_cast<int64_t>(std::llround(rttMs * 500.0)));
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(DataRate("10Gbps")));
    access.SetChannelAttribute("Delay", TimeValue(oneWay));
    access.SetQueue("ns3::DropTailQueue", "MaxSize", QueueSizeValue(QueueSize("10000p")));
    NetDeviceContainer a = access.Install(sender, router);

    uint32_t bufferPkts = static_cast<uint32_t>(bufferBytes / static_cast<uint64_t>(kTestbedFrameBytes));
    DataRate rate(static_cast<uint64_t>(std::llround(bwMbps * 1e6 * kNs3FrameBytes / kTestbedFrameBytes)));
    PointToPointHelper bottleneck;
    bottleneck.SetChannelAttribute("Delay", TimeValue(Seconds(0)));
    bottleneck.SetQueue("ns3::DropTailQueue",
                        "MaxSize",
                        QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, bufferPkts)));
    NetDeviceContainer b = bottleneck.Install(router, receiver);
    Ptr<PointToPointNetDevice> routerOut = DynamicCast<PointToPointNetDevice>(b.Get(0));
    Ptr<PointToPointNetDevice> receiverOut = DynamicCast<PointToPointNetDevice>(b.Get(1));
    routerOut->SetDataRate(rate);
    // The ACK direction is not shaped on the testbed.
    receiverOut->SetDataRate(DataRate("10Gbps"));

    if (loss > 0.0 && rateErrorModel)
    {
        Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
        em->SetUnit(RateErrorModel::ERROR_UNIT_PACKET);
        em->SetRate(loss);
        em->AssignStreams(1);
        a.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(em));
    }
    else if (loss > 0.0)
    {
        Ptr<TestbedLoss> em = CreateObject<TestbedLoss>();
        em->Configure(seed, loss);
        a.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(em));
    }

    InternetStackHelper stack;
    stack.Install(nodes);
    Ipv4AddressHelper addr;
    addr.SetBase("10.77.1.0", "255.255.255.0");
    addr.Assign(a);
    addr.SetBase("10.77.2.0", "255.255.255.0");
    Ipv4InterfaceContainer bi = addr.Assign(b);
    TrafficControlHelper tch;
    tch.Uninstall(b.Get(0));
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                InetSocketAddress(Ipv4Address::GetAny(), kPort));
    ApplicationContainer sinkApp = sinkHelper.Install(receiver);
    sinkApp.Start(Seconds(0));

    g.sink = DynamicCast<PacketSink>(sinkApp.Get(0));
    g.bottleneckQueue = routerOut->GetQueue();
    g.bottleneckRate = rate;
    g.oneWay = oneWay;
    g.duration = Seconds(durationS);
    Simulator::Schedule(Seconds(0), &Start, sender, bi.GetAddress(1));
    // A bound for a connection that never completes.
    Simulator::Stop(Seconds(durationS + 120.0));
    Simulator::Run();
    Simulator::Destroy();

    std::string status = "ok";
    if (!g.connected)
    {
        status = "failed: the connection was never established";
    }
    else if (!g.done)
    {
        status = "failed: the run did not end";
    }
    else if (g.rxBytes == 0)
    {
        status = "no-delivery: nothing delivered";
    }

    double tputMbps = g.rxBytes * 8.0 / durationS / 1e6;
    double util = tputMbps / bwMbps;
    double meanRttMs = Mean(g.srttUs) / 1e3;
    double p95SrttMs = Percentile(g.srttUs, 950) / 1e3;
    std::vector<double> qdelay;
    for (double r : g.srttUs)
    {
        qdelay.push_back(std::max(0.0, r - rttMs * 1e3));
    }
    double lossRate = g.dataSegsOut == 0 ? 0.0 : double(g.retransSegs) / g.dataSegsOut;
    double rttForScore = meanRttMs > 0.0 ? meanRttMs : 1.0;
    // eval/src/runner: MIN_TPUT_MBPS floors the reward's throughput.
    double reward = std::log(std::max(tputMbps, 1e-3) / rttForScore);
    double power = tputMbps / (rttForScore / 1e3);
    if (util > 1.0 + 1e-9)
    {
        status = "invalid: utilization " + Num(util) + " > 1";
    }

    if (header)
    {
        std::cout << kHeader << "\n";
    }
    std::cout << scenario << "," << env << "," << condition << "," << Num(bwMbps) << ","
              << Num(rttMs) << "," << Num(loss) << "," << bufferBytes << "," << scheme << ","
              << seed << ",0,main," << scheme << ",,0," << Num(tputMbps) << "," << Num(util)
              << "," << Num(meanRttMs) << "," << Num(p95SrttMs) << "," << Num(p95SrttMs) << ","
              << Num(Mean(qdelay) / 1e3) << "," << Num(Percentile(qdelay, 950) / 1e3) << ","
              << Num(lossRate) << ",," << Num(reward) << "," << Num(power) << ",1,"
              << g.retransSegs << "," << g.timeouts << ",0,0,reward," << Num(reward) << ","
              << status << "\n";
    return status == "ok" ? 0 : 1;
}
