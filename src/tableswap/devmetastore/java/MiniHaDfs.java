// A local HDFS with highly available NameNodes: Hadoop's MiniDFSCluster with one nameservice (ns1), two
// NameNodes (nn0, nn1) and one DataNode on 127.0.0.1, nn0 active. Compiled at first use by
// tableswap.devmetastore.hdfs_ha (the JDK's javac, against the hadoop-client-minicluster jars) into the jar
// cache, then reused.
//
//   java -cp <classes>:<minicluster jars> MiniHaDfs STATE_DIR [NAME=VALUE ...]
//
// It formats STATE_DIR/data, writes a client's HADOOP_CONF_DIR into STATE_DIR/conf (core-site.xml with
// fs.defaultFS hdfs://ns1, hdfs-site.xml with the nameservice, its NameNodes' RPC and HTTP addresses and the
// failover proxy provider), then prints one line "ready nn0=HOST:PORT nn1=HOST:PORT" on its standard output.
// Hadoop's own logging goes to the standard error. It then reads commands, one a line, from its standard input
// and answers each with one line "ok ..." or "error ...":
//
//   state              the NameNodes' states: "ok nn0=active nn1=standby" (a NameNode shut down is "down")
//   failover           the active NameNode becomes standby, the other one active (a graceful failover)
//   kill-active        the active NameNode is shut down (its process gone: connections refused), the other
//                      one made active
//   restart N          NameNode N (0 or 1) started again, as a standby
//   stop               shut everything down and exit (so does the end of the input)

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;

public final class MiniHaDfs {
    static final String NAMESERVICE = "ns1";
    static final String[] NAMENODES = {"nn0", "nn1"};
    static final String HOST = "127.0.0.1";
    static final String PROXY_PROVIDER = "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider";

    private final MiniDFSCluster cluster;

    private MiniHaDfs(MiniDFSCluster cluster) {
        this.cluster = cluster;
    }

    public static void main(String[] args) throws Exception {
        // The standard output carries this program's answers only: whatever Hadoop prints goes to stderr.
        PrintStream answers = new PrintStream(System.out, true, "UTF-8");
        System.setOut(System.err);
        if (args.length < 1) {
            answers.println("error usage: MiniHaDfs STATE_DIR [NAME=VALUE ...]");
            System.exit(2);
        }
        Path state = Paths.get(args[0]).toAbsolutePath();
        Configuration conf = new HdfsConfiguration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, state.resolve("data").toString());
        conf.set("dfs.ha.tail-edits.period", "1s");  // the standby follows the active closely
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int[] ports = freePorts(4);
        MiniDFSNNTopology.NSConf nameservice = new MiniDFSNNTopology.NSConf(NAMESERVICE);
        for (int i = 0; i < NAMENODES.length; i++) {
            nameservice.addNN(new MiniDFSNNTopology.NNConf(NAMENODES[i])
                    .setIpcPort(ports[2 * i]).setHttpPort(ports[2 * i + 1]));
        }
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .nnTopology(new MiniDFSNNTopology().addNameservice(nameservice))
                .numDataNodes(1)
                .format(true)
                .build();
        cluster.waitActive();
        cluster.transitionToActive(0);
        MiniHaDfs dfs = new MiniHaDfs(cluster);
        dfs.writeClientConf(state.resolve("conf"), conf);
        answers.println("ready " + dfs.rpcAddresses());
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            String command = line.trim();
            if (command.isEmpty()) {
                continue;
            }
            if (command.equals("stop")) {
                break;
            }
            try {
                answers.println("ok " + dfs.run(command));
            } catch (Exception e) {
                answers.println("error " + command + ": " + e.toString().replace('\n', ' '));
            }
        }
        cluster.shutdown();
        answers.println("ok stopped");
    }

    private String run(String command) throws IOException {
        String[] words = command.split("\\s+");
        switch (words[0]) {
            case "state":
                return states();
            case "failover": {
                int active = active();
                awaitOutOfSafeMode(1 - active);
                cluster.transitionToStandby(active);
                cluster.transitionToActive(1 - active);
                return states();
            }
            case "kill-active": {
                int active = active();
                awaitOutOfSafeMode(1 - active);
                cluster.shutdownNameNode(active);
                cluster.transitionToActive(1 - active);
                return states();
            }
            case "restart": {
                int index = Integer.parseInt(words[1]);
                cluster.restartNameNode(index, false);
                awaitOutOfSafeMode(index);
                return states();
            }
            default:
                throw new IllegalArgumentException("unknown command (state, failover, kill-active, restart N, stop)");
        }
    }

    /** Wait until NameNode {@code i} has left safe mode: a restarted one starts in it and stays there until the
     *  DataNodes' block reports reach it; made active before that, it refuses every write (SafeModeException). */
    private void awaitOutOfSafeMode(int i) throws IOException {
        long deadline = System.currentTimeMillis() + 120_000;
        while (cluster.getNameNode(i).isInSafeMode()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IOException("NameNode " + NAMENODES[i] + " still in safe mode after 120 s");
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException(e);
            }
        }
    }

    private int active() {
        for (int i = 0; i < NAMENODES.length; i++) {
            if (up(i) && cluster.getNameNode(i).isActiveState()) {
                return i;
            }
        }
        throw new IllegalStateException("no NameNode is active: " + states());
    }

    /** Whether NameNode {@code i} runs (MiniDFSCluster forgets one it shut down; its own isNameNodeUp also
     *  asks for the NameNode out of safe mode, which a restarted standby is not at first). */
    private boolean up(int i) {
        return cluster.getNameNode(i) != null;
    }

    private String states() {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < NAMENODES.length; i++) {
            String state = !up(i) ? "down" : cluster.getNameNode(i).isActiveState() ? "active" : "standby";
            out.append(i == 0 ? "" : " ").append(NAMENODES[i]).append('=').append(state);
        }
        return out.toString();
    }

    private String rpcAddresses() {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < NAMENODES.length; i++) {
            out.append(i == 0 ? "" : " ").append(NAMENODES[i]).append('=').append(address(rpc(i)));
        }
        return out.toString();
    }

    private InetSocketAddress rpc(int i) {
        return cluster.getNameNode(i).getNameNodeAddress();
    }

    private static String address(InetSocketAddress a) {
        return HOST + ":" + a.getPort();
    }

    /** core-site.xml and hdfs-site.xml of a client of the nameservice (and the trash settings given). */
    private void writeClientConf(Path dir, Configuration given) throws IOException {
        Files.createDirectories(dir);
        Map<String, String> core = new LinkedHashMap<>();
        core.put("fs.defaultFS", "hdfs://" + NAMESERVICE);
        for (Map.Entry<String, String> e : given) {
            if (e.getKey().startsWith("fs.trash.")) {
                core.put(e.getKey(), e.getValue());
            }
        }
        Map<String, String> hdfs = new LinkedHashMap<>();
        hdfs.put("dfs.nameservices", NAMESERVICE);
        hdfs.put("dfs.ha.namenodes." + NAMESERVICE, String.join(",", NAMENODES));
        for (int i = 0; i < NAMENODES.length; i++) {
            String suffix = NAMESERVICE + "." + NAMENODES[i];
            hdfs.put("dfs.namenode.rpc-address." + suffix, address(rpc(i)));
            hdfs.put("dfs.namenode.http-address." + suffix, address(cluster.getNameNode(i).getHttpAddress()));
        }
        hdfs.put("dfs.client.failover.proxy.provider." + NAMESERVICE, PROXY_PROVIDER);
        hdfs.put("dfs.replication", "1");
        write(dir.resolve("core-site.xml"), core);
        write(dir.resolve("hdfs-site.xml"), hdfs);
    }

    private static void write(Path file, Map<String, String> properties) throws IOException {
        StringBuilder xml = new StringBuilder("<?xml version=\"1.0\"?>\n<configuration>\n");
        for (Map.Entry<String, String> e : properties.entrySet()) {
            xml.append("  <property><name>").append(e.getKey()).append("</name><value>").append(e.getValue())
                    .append("</value></property>\n");
        }
        xml.append("</configuration>\n");
        Path partial = file.resolveSibling(file.getFileName() + ".partial");
        Files.write(partial, xml.toString().getBytes(StandardCharsets.UTF_8));
        Files.move(partial, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    private static int[] freePorts(int n) throws IOException {
        ServerSocket[] sockets = new ServerSocket[n];
        int[] ports = new int[n];
        try {
            for (int i = 0; i < n; i++) {
                sockets[i] = new ServerSocket(0, 1, java.net.InetAddress.getByName(HOST));
                ports[i] = sockets[i].getLocalPort();
            }
        } finally {
            for (ServerSocket s : sockets) {
                if (s != null) {
                    s.close();
                }
            }
        }
        return ports;
    }
}
